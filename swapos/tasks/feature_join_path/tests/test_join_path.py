from solution import join_path, split_path


def test_plain_parts() -> None:
    assert join_path("api", "v1", "users") == "api/v1/users"


def test_slashes_at_the_joins() -> None:
    assert join_path("/api/", "/v1", "users/") == "/api/v1/users"
    assert join_path("a/", "/b") == "a/b"


def test_empty_parts_are_ignored() -> None:
    assert join_path("a", "", "b") == "a/b"


def test_parts_with_inner_segments() -> None:
    assert join_path("/static", "css//site.css") == "/static/css/site.css"


def test_root_and_nothing() -> None:
    assert join_path("/") == "/"
    assert join_path() == ""


def test_split_path_unchanged() -> None:
    assert split_path("/a//b/") == ["a", "b"]
