from solution import slugify, title_case


def test_basic_title() -> None:
    assert slugify("Hello, World!") == "hello-world"


def test_runs_collapse_and_ends_are_trimmed() -> None:
    assert slugify("  SwapOS 2.0 -- Release Notes ") == "swapos-2-0-release-notes"


def test_symbols() -> None:
    assert slugify("C++ & Rust: a comparison") == "c-rust-a-comparison"


def test_existing_slug_is_unchanged() -> None:
    assert slugify("already-a-slug") == "already-a-slug"


def test_empty_and_symbols_only() -> None:
    assert slugify("") == ""
    assert slugify("!!!") == ""


def test_title_case_still_works() -> None:
    assert title_case("hello world") == "Hello World"
