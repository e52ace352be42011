"""Examples in markdown briefs, on lines collected from real projects' READMEs, docs and
issue reports (each fixture names where it came from; the text is quoted as found, cut to
the lines that matter), then on the rules that keep a bug report's quoted bug out."""

from __future__ import annotations

import pytest

from swapos.passes.brief_examples import brief_examples


class Form:
    """One real-world excerpt, the names its module would define, and what must be read."""

    def __init__(
        self,
        source: str,
        text: str,
        names: tuple[str, ...],
        want: list[tuple[str, str]],
        category: str = "feature",
        *,
        preamble: str = "",
    ) -> None:
        self.source, self.text, self.names = source, text, names
        self.want, self.category, self.preamble = want, category, preamble

    def starter(self) -> str:
        """The module's imports and value classes (``preamble``), then its functions."""
        defs = "".join(f"def {n}(*args, **kwargs):\n    pass\n\n\n" for n in self.names)
        return self.preamble + defs


REAL_FORMS = [
    # --- two code spans joined by a verb, in a markdown list ------------------------------
    Form(
        "github:unclecode/test-js 8_intermediate_algorithm_scripting/4_part_4/"
        "16_steamroller/lecture_16.md (freeCodeCamp's Steamroller)",
        '*   🧪 `steamrollArray([[["a"]], [["b"]]])` should return `["a", "b"]`.\n'
        "*   🧪 `steamrollArray([1, [2], [3, [[4]]]])` should return `[1, 2, 3, 4]`.\n"
        "*   🧪 `steamrollArray([1, [], [3, [[4]]]])` should return `[1, 3, 4]`.\n"
        "*   🧪 `steamrollArray([1, {}, [3, [[4]]]])` should return `[1, {}, 3, 4]`.\n",
        ("steamrollArray",),
        [
            ('steamrollArray([[["a"]], [["b"]]])', '["a", "b"]'),
            ("steamrollArray([1, [2], [3, [[4]]]])", "[1, 2, 3, 4]"),
            ("steamrollArray([1, [], [3, [[4]]]])", "[1, 3, 4]"),
            ("steamrollArray([1, {}, [3, [[4]]]])", "[1, {}, 3, 4]"),
        ],
    ),
    Form(
        "a design plan's test list (public repository, found by an exact-string search for "
        "')` returns `')",
        "1. **Milestone detection logic** — Extract the milestone detection into a pure\n"
        "function `getMilestone(currentIndex, totalQuestions)` in a utils file. Test:\n"
        "   - `getMilestone(3, 8)` returns `'halfway'`\n"
        "   - `getMilestone(0, 2)` returns `null` (too few questions)\n"
        "   - `getMilestone(6, 8)` returns `'last-question'`\n",
        (),
        [("getMilestone(3, 8)", "'halfway'"), ("getMilestone(6, 8)", "'last-question'")],
    ),
    Form(
        "dart.dev codelab text, quoted in a public cheat-sheet translation (exact-string search "
        "for ')` should return `')",
        "The following function takes two integers as parameters. Make it return a string\n"
        "containing both integers separated by a space. For example, `stringify(2, 3)` should\n"
        "return `'2 3'`.\n",
        (),
        [("stringify(2, 3)", "'2 3'")],
    ),
    # --- doctest lines in a README -------------------------------------------------------
    Form(
        "github:darklaunch/darklaunch.com blog/2018/02/21/use-django-slugify.md",
        "Do the following to use Django's slugify function:\n\n```python\n"
        ">>> from django.utils.text import slugify\n"
        ">>> slugify('Love people, use things. The opposite never works.')\n"
        "u'love-people-use-things-the-opposite-never-works'\n```\n",
        (),
        [
            (
                "slugify('Love people, use things. The opposite never works.')",
                "u'love-people-use-things-the-opposite-never-works'",
            )
        ],
    ),
    Form(
        "github:pypi-data/pypi-mirror-295 packages/caseutil/caseutil-0.6.5.tar.gz/"
        "caseutil-0.6.5/tests/test_readme.txt",
        ">>> from caseutil import *\n\n>>> is_snake('My variable-name')\nFalse\n\n"
        ">>> to_snake('My variable-name')\n'my_variable_name'\n\n"
        ">>> is_case('camel', 'myVariableName')\nTrue\n"
        ">>> to_case(Case.CONST, 'myVariableName')\n'MY_VARIABLE_NAME'\n\n"
        ">>> '/'.join(words(to_lower('myVariableName')))\n'my/variable/name'\n",
        (),
        [
            ("is_snake('My variable-name')", "False"),
            ("to_snake('My variable-name')", "'my_variable_name'"),
            ("is_case('camel', 'myVariableName')", "True"),
        ],
    ),
    Form(
        "pypi.org/project/humanize/0.2 (the README's usage): module-qualified calls",
        "Integer humanization:\n\n>>> import humanize\n>>> humanize.intcomma(12345)\n'12,345'\n"
        ">>> humanize.intword(123455913)\n'123.5 million'\n",
        (),
        [],  # ``humanize.intcomma`` is not a function of solution.py
    ),
    # --- a bug report: the expected block counts, the actual one does not ---------------
    Form(
        "github:jmoiron/humanize issue #145 (with the call made plain, as a fixed brief "
        "would write it)",
        "### What did you do?\n```pycon\n>>> naturalsize(1073741824)\n```\n\n"
        "### What did you expect to happen?\n```pycon\n>>> naturalsize(1073741824)\n"
        "'1.0 GB'\n```\n\n### What actually happened?\n```pycon\n"
        ">>> naturalsize(1073741824)\n'1.1 GB'\n```\n",
        ("naturalsize",),
        [("naturalsize(1073741824)", "'1.0 GB'")],
        category="bugfix",
    ),
    Form(
        "github:jmoiron/humanize issue #145, verbatim: the call is module-qualified and its "
        "argument arithmetic",
        "### What did you expect to happen?\n```pycon\n"
        ">>> humanize.naturalsize(1024*1024*1024)\n'1.0 GB'\n```\n",
        ("naturalsize",),
        [],
        category="bugfix",
    ),
    Form(
        "github:python-humanize/humanize pull request #250 (a regression described)",
        'Currently if `gnu` is set to False, calling `naturalsize(1.0)` or `naturalsize("1")`\n'
        'will return `"1.0 Byte` instead of `"1 Byte"`, which was the return value until 4.12.\n',
        ("naturalsize",),
        [],
        category="bugfix",
    ),
    Form(
        "github:mysteriumnetwork/api pull request #52, a review comment",
        "`humanize.naturalsize(1024 * 1024 * 1024)` returns `'1.1 GB'`, which is incorrect - "
        "it should be 1 GB.\n",
        ("naturalsize",),
        [],
        category="bugfix",
    ),
    # --- arrows that are not examples: renames, signatures, types ------------------------
    Form(
        "a firmware refactor plan (exact-string search for ')` → `'): functions renamed",
        "从 `main.c` 移动：\n\n1. `ADKey_ReadAdc()` → `BSP_Key_ReadAdc()`\n"  # noqa: RUF001
        "2. `ADKey_Decode()` → `BSP_Key_Decode()`\n",
        ("ADKey_ReadAdc", "ADKey_Decode"),
        [],
        category="refactor",
    ),
    Form(
        "a colour-DSL reference (exact-string search for ')` -> `'): signatures",
        "**DSL Constructor:** `HSV(h, s, v)` -> `Color`\n\n**Model-specific methods:**\n"
        "- `tint(amount)` -> lower S (desaturate toward white)\n"
        "- `shade(amount)` -> lower V (darken toward black)\n",
        (),
        [],
    ),
    Form(
        "a React fix plan (exact-string search for ')` → `'): a code change, not a value",
        "Frontend: zmienić inicjalizację `useState(null)` → `useState(false)`, a w\n"
        "`loadScriptCounts` po obliczeniu total\n",
        (),
        [],
        category="bugfix",
    ),
    # --- tables -------------------------------------------------------------------------
    Form(
        "github:approvals/ApprovalTests.Python docs/reference/markdown_table.md",
        "| Input | Camel Case | Snake Case | Kebab Case |\n| --- | --- | --- | --- |\n"
        "| verify json | verifyJson | verify_json | verify-json |\n",
        (),
        [],  # no column of calls
    ),
    Form(
        "a Spark optimiser note (exact-string search for ')` | `'): Before/After",
        "| Before | After |\n|--------|-------|\n| `5 + 10` | `15` |\n"
        "| `LENGTH('abc')` | `3` |\n| `UPPER('hello')` | `'HELLO'` |\n",
        ("LENGTH", "UPPER"),
        [],  # "After" names no output column
    ),
    Form(
        "a Rust telemetry builder's README (exact-string search for '\")` | `\"'): defaults",
        "| Builder call | Default | Notes |\n|---|---|---|\n"
        '| `new("service-name")` | — | required; becomes `service.name` |\n'
        '| `.version("1.2.3")` | `"0.0.0"` | becomes `service.version` |\n'
        '| `.log_level("info")` | `"info"` | any `env-filter` directive |\n',
        (),
        [],  # a default is not an output
    ),
    Form(
        "a spreadsheet function's doc (exact-string search for '\")` | `\"'): test cases",
        "## Test Cases\n| Input | Expected | Purpose |\n|---|---|---|\n"
        '| `=DETECTLANGUAGE("The quick brown fox.")` | `"en"` | Golden path |\n'
        '| `=DETECTLANGUAGE("")` | `"und"` | Empty input |\n',
        ("DETECTLANGUAGE",),
        [],  # ``=DETECTLANGUAGE(...)`` is a formula, not a Python call
    ),
    Form(
        "a SQL functions cheat sheet (exact-string search for '| Example | Result |')",
        "| Function | Purpose | Example | Result |\n|----------|---------|---------|--------|\n"
        "| `UPPER()` | Converts to uppercase | `UPPER('hello')` | `HELLO` |\n"
        "| `LEN()` | Returns string length | `LEN('hello')` | `5` |\n",
        (),
        [],  # two calls in a row: which one the result belongs to is not said
    ),
    Form(
        "an SDL binding's API table (exact-string search for '| Call | Returns |')",
        "## The API\n\n| Call | Returns | Behaviour |\n| --- | --- | --- |\n"
        "| `Graphics.open(width, height, title)` | `Surface` | Open the window. |\n",
        (),
        [],  # a return type, not a value
    ),
    Form(
        "a font-loading note (exact-string search for '| call | returns |')",
        "| call | returns |\n|---|---|\n| `document.fonts.check('13px Poppins')` | **true** |\n",
        (),
        [],  # a method of an object, not a function of the module
    ),
    # --- values that are no literals: arithmetic, constructions of value types ---------
    Form(
        "humanize's naturalsize docstring (public repository, exact-string search for "
        "'>>> naturalsize(10**')",
        "    Examples:\n        >>> naturalsize(3000000)\n        '3.0 MB'\n"
        "        >>> naturalsize(3000, False, True)\n        '2.9K'\n"
        "        >>> naturalsize(10**28)\n        '10.0 RB'\n"
        "        >>> naturalsize(10**34 * 3)\n        '30000.0 QB'\n",
        ("naturalsize",),
        [
            ("naturalsize(3000000)", "'3.0 MB'"),
            ("naturalsize(3000, False, True)", "'2.9K'"),
            ("naturalsize(10**28)", "'10.0 RB'"),
            ("naturalsize(10**34 * 3)", "'30000.0 QB'"),
        ],
    ),
    Form(
        "a date_range docstring (public repository, exact-string search for "
        "'>>> date_range(date(')",
        "    Example::\n\n        >>> from datetime import date\n"
        "        >>> date_range(date(2024, 1, 1), date(2024, 1, 3))\n"
        "        [datetime.date(2024, 1, 1), datetime.date(2024, 1, 2), "
        "datetime.date(2024, 1, 3)]\n",
        ("date_range",),
        [
            (
                "date_range(date(2024, 1, 1), date(2024, 1, 3))",
                "[datetime.date(2024, 1, 1), datetime.date(2024, 1, 2), datetime.date(2024, 1, 3)]",
            )
        ],
        preamble="from datetime import date, timedelta\n\n\n",
    ),
    Form(
        "a business-calendar docstring (public repository, exact-string search for "
        "'>>> date_range(date(')",
        "    >>> date_range(Date(2014, 4, 3), None, 3)\n    (Date(2014, 4, 3), Date(2014, 4, 8))\n",
        ("date_range",),
        [],  # its Date compares by identity: no value of it equals another
        preamble="class Date:\n    def __init__(self, y, m, d):\n        self.ymd = y, m, d\n\n\n",
    ),
    Form(
        "Rosetta Code, Averages/Arithmetic mean, Python (public repository, exact-string "
        "search for '>>> mean([Decimal(')",
        ">>> from statistics import mean\n>>> mean([1e20,-1e-20,3,1,4,1,5,9,-1e20,1e-20])\n2.3\n"
        ">>> mean([10**10000, -10**10000, 3, 1, 4, 1, 5, 9, 0, 0])\n2.3\n"
        ">>> big = 10**10000\n"
        ">>> mean([Decimal(big), Decimal(-big), 3, 1, 4, 1, 5, 9, 1/Decimal(big), "
        "-1/Decimal(big)])\nDecimal('2.3')\n",
        ("mean",),
        # 10**10000: an exponent past MAX_EXPONENT; Decimal(big): a variable, no value
        [("mean([1e20,-1e-20,3,1,4,1,5,9,-1e20,1e-20])", "2.3")],
        preamble="from decimal import Decimal\nfrom fractions import Fraction\n\n\n",
    ),
    # --- calls on names the brief's code gives a value -----------------------------------
    Form(
        "glom's docstring, as rendered in a public repository's API notes (exact-string "
        "search for '`glom(target, ')",
        "> Accessing nested data, aka deep-get:\n> \n> >>> target = {'a': {'b': 'c'}}\n"
        "> >>> glom(target, 'a.b')\n> 'c'\n",
        ("glom",),
        [("glom({'a': {'b': 'c'}}, 'a.b')", "'c'")],  # a quote is read as what it quotes
    ),
    Form(
        "glom's docstring (public repository, exact-string search for '`glom(target, ')",
        "    Accessing nested data, aka deep-get:\n\n    >>> target = {'a': {'b': 'c'}}\n"
        "    >>> glom(target, 'a.b')\n    'c'\n",
        ("glom",),
        [("glom({'a': {'b': 'c'}}, 'a.b')", "'c'")],
    ),
    Form(
        "glom's docstring, Call (public repository, exact-string search for '`glom(target, ')",
        "    >>> class ExampleClass(object):\n    ...    def __init__(self, attr):\n"
        "    ...        self.attr = attr\n    ...\n    >>> target = {'attr': 3.14}\n"
        "    >>> glom(target, Call(ExampleClass, kwargs=T)).attr\n    3.14\n",
        ("glom",),
        [],  # an attribute of the call's result, and specs that are no values
    ),
    # --- doctests of print(): the text it shows -----------------------------------------
    Form(
        "a table helper's docstring, after tabulate (public repository, exact-string search "
        "for '>>> print(tabulate(table, headers')",
        "    Example formatting:\n    ```repl\n"
        "    >>> table = [['foo', 456], ['baaaar', 6724], ['tar.gz', 32]]\n"
        "    >>> headers = ['name', 'num']\n"
        '    >>> print(tabulate(table, headers, tablefmt="github")) \n'
        "    | name   | num  |\n    |--------|------|\n    | foo    |  456 |\n"
        "    | baaaar | 6724 |\n    | tar.gz |   32 |\n    ```\n",
        ("tabulate",),
        [
            (
                "tabulate([['foo', 456], ['baaaar', 6724], ['tar.gz', 32]], ['name', 'num'], "
                "tablefmt='github')",
                repr(
                    "| name   | num  |\n|--------|------|\n| foo    |  456 |\n"
                    "| baaaar | 6724 |\n| tar.gz |   32 |"
                ),
            )
        ],
    ),
    Form(
        "a README on tabulate (public repository, exact-string search for "
        "'>>> print(tabulate(table, headers')",
        "```python\n>>> from tabulate import tabulate\n\n"
        '>>> table = [["Sun",696000,1989100000],["Earth",6371,5973.6],\n'
        '...          ["Moon",1737,73.5],["Mars",3390,641.85]]\n'
        ">>> print(tabulate(table))\n-----  ------  -------------\n"
        "Sun    696000     1.9891e+09\nEarth    6371  5973.6\nMoon     1737    73.5\n"
        "Mars     3390   641.85\n-----  ------  -------------\n```\n",
        ("tabulate",),
        [
            (
                "tabulate([['Sun', 696000, 1989100000], ['Earth', 6371, 5973.6], "
                "['Moon', 1737, 73.5], ['Mars', 3390, 641.85]])",
                repr(
                    "-----  ------  -------------\nSun    696000     1.9891e+09\n"
                    "Earth    6371  5973.6\nMoon     1737    73.5\nMars     3390   641.85\n"
                    "-----  ------  -------------"
                ),
            )
        ],
    ),
    # --- a table of one function's inputs -------------------------------------------------
    Form(
        "a module spec with a table per function (public repository, exact-string search "
        "for '| Input | Output |'; cut to one function)",
        "### `local(stamp: str | None) -> str | None`\n\nThe only producer of a displayed "
        "timestamp in the system.\n\n| Input | Output |\n|---|---|\n"
        '| `"2026-08-30T01:31:07Z"`, host in `America/New_York` '
        '| `"2026-08-29 21:31:07 -04:00"` |\n'
        "| `None` | `None` |\n",
        ("local",),
        [],  # its signature shows a return type too: which function a table serves is not said
    ),
    Form(
        "a search channel's test plan (public repository, exact-string search for "
        "'| Input | Expected |')",
        "| Condition | Implementation |\n|-----------|---------------|\n"
        "| Empty query string | `preprocess_query` returns `None`; `search` returns `[]` |\n\n"
        "### Unit Tests: Qualified Name Detection\n\n| Test Case | Input | Expected |\n"
        '|-----------|-------|----------|\n| Has dot | `"Nat.add"` | `True` |\n'
        '| No dot, has underscore | `"add_comm"` | `False` |\n',
        ("preprocess_query", "search"),
        [],  # the brief names no function with its parameter
    ),
    Form(
        "a slugify walkthrough (public repository, exact-string search for '| Input | Output |'), "
        "with the signature line a brief would add (`` `batch_slug(name)` ``) and another call",
        '`batch_slug(name)` lowers the name; `name.strip("-")` removes hyphens; '
        "see `make_id(batch)`.\n\n| Input | Output |\n|---|---|\n"
        '| `"Riyadh Municipality"` | `"riyadh-municipality"` |\n',
        ("batch_slug",),
        [],  # make_id is named too: whose inputs the table holds is not said
    ),
    Form(
        "the same walkthrough, its function the only one named (written for this test in the "
        "form of the one above)",
        "`batch_slug(name)` lowers the name and joins its words with hyphens.\n\n"
        "Real results:\n\n| Input | Output |\n|---|---|\n"
        '| `"Riyadh Municipality"` | `"riyadh-municipality"` |\n'
        '| `"  Wikipedia AR!! "` | `"wikipedia-ar"` |\n'
        "| exact duplicate rows | removed, and counted |\n",
        ("batch_slug",),
        [
            ('batch_slug("Riyadh Municipality")', '"riyadh-municipality"'),
            ('batch_slug("  Wikipedia AR!! ")', '"wikipedia-ar"'),
        ],
    ),
    # --- a call with its value in a comment, in a fenced block ----------------------------
    Form(
        "an exercise brief adapted from exercism/python's rna-transcription (public "
        "repository, exact-string search for '\")  # -> \"')",
        "## Rules\nReplace each letter with its partner, leaving the order untouched:\n\n"
        "```python\n"
        'solve("C")             # -> "G"\n'
        'solve("ACGTGGTCTTAA")  # -> "UGCACCAGAAUU"\n'
        'solve("")              # -> ""\n'
        "```\n\n### Hint 3\nDifferent data, same swap:\n\n```python\n"
        "table = str.maketrans('abc', 'xyz')\n'cab'.translate(table)   # -> 'zxy'\n```\n",
        ("solve",),
        [('solve("C")', '"G"'), ('solve("ACGTGGTCTTAA")', '"UGCACCAGAAUU"'), ('solve("")', '""')],
    ),
    Form(
        "an exercise's example usage (public repository, exact-string search for "
        "')  # Output: '), cut to its calls; the list is a value the block gives no call",
        "```python\n# Example usage\nnums = [10, 20, 4, 45, 99, 99]\n"
        "print(find_second_largest(nums))  # Output: 45\n"
        'print(longestPalindrome("babad"))  # Output: "bab" or "aba"\n'
        'print(longestPalindrome("cbbd"))   # Output: "bb"\n'
        'print("Product of list:", product_of_list(nums))  # Output: 120\n```\n',
        ("find_second_largest", "longestPalindrome", "product_of_list"),
        [('longestPalindrome("cbbd")', repr("bb"))],
    ),
    Form(
        "Stanford CS41's Python notes, Functional Tools (public repository, exact-string "
        "search for \"')  # => '\"): a lambda is no named call",
        "```Python\n(lambda val: val ** 2)(5)  # => 25\n"
        "(lambda s: s.upper())('pytHoN')  # => 'PYTHON'\n```\n",
        (),
        [],
    ),
    Form(
        "a linked list's README (public repository, exact-string search for \"')  # => '\"): "
        "values after calls that change the object (a stateful scenario) are not read",
        "```python\nmylist = LinkedList()\n\nmylist.append('a')\nmylist.append('c')\n\n"
        "mylist.head.data  # => 'a'\nmylist.find(lambda data: data > 'b')  # => 'c'\n```\n",
        ("LinkedList",),
        [],
    ),
    # --- a doctest session: later lines with the earlier ones as their setup ---------------
    Form(
        "an embedding cache's docstring (public repository, exact-string search for "
        "'>>> cache.get(')",
        "    Examples\n    --------\n    >>> cache = LRUEmbeddingCache(max_size=2)\n"
        '    >>> cache.put("a", [1.0, 2.0])\n    >>> cache.get("a")\n    [1.0, 2.0]\n'
        '    >>> cache.put("b", [3.0, 4.0])\n'
        '    >>> cache.put("c", [5.0, 6.0])  # evicts "a" (least recently used)\n'
        '    >>> cache.get("a") is None\n    True\n',
        ("LRUEmbeddingCache",),
        [("cache.get('a')", "[1.0, 2.0]"), ("cache.get('a') is None", "True")],
    ),
    Form(
        "polars' LRUCache docstring, polars/_utils/cache.py (public repository, exact-string "
        "search for '>>> cache.get(')",
        "        >>> from polars._utils.cache import LRUCache\n"
        "        >>> cache = LRUCache[str, int](maxsize=3)\n"
        '        >>> cache["a"] = 1\n        >>> cache["b"] = 2\n        >>> cache["c"] = 3\n'
        '        >>> cache["d"] = 4  # evicts the least recently used item ("a"), as maxsize=3\n'
        '        >>> print(cache["b"])  # accessing "b" marks it as recently used\n        2\n'
        "        >>> print(list(cache.keys()))  # show the current keys in LRU order\n"
        "        ['c', 'd', 'b']\n"
        '        >>> cache.get("xyz", "not found")\n        \'not found\'\n',
        ("LRUCache",),
        [
            ("cache['b']", repr("2")),
            ("list(cache.keys())", repr("['c', 'd', 'b']")),
            ("cache.get('xyz', 'not found')", "'not found'"),
        ],
    ),
    Form(
        "a DNS cache's docstring (public repository, exact-string search for '>>> cache.get('): "
        "its module is the project's own package, so the session is not ours to run",
        "    Example use:\n        >>> import time\n"
        "        >>> from foghorn.plugins.cache.backends.foghorn_ttl import FoghornTTLCache\n"
        "        >>> cache = FoghornTTLCache()\n"
        '        >>> key = ("example.com", 1) # QNAME, QTYPE\n'
        '        >>> cache.set(key, 60, b"dns-response-data")\n        >>> cache.get(key)\n'
        "        b'dns-response-data'\n",
        ("TTLCache",),
        [],
    ),
    Form(
        "a cache docstring (public repository, exact-string search for '>>> cache.get('): a "
        "name the session reads that nothing binds (it clears another cache than it shows)",
        "    Examples:\n        >>> cache = InMemoryCache()\n"
        '        >>> cache.set("test:1", "value1")\n        >>> clear_cache_by_prefix("test")\n'
        '        >>> cache.get("test:1") is None\n        True\n'
        '        >>> default_cache.get("other:1") is None\n        False\n',
        ("InMemoryCache", "clear_cache_by_prefix"),
        [],
    ),
    Form(
        "a data-structures README's checklist (public repository, exact-string search for "
        "'`q = Queue(); q.'): statements joined by ``;`` with the last one's value",
        "#### Code Example Validation\n\n"
        "✅ Stack example works: `s = Stack(); s.push(1); s.peek()` returns 1  \n"
        "✅ Queue example works: `q = Queue(); q.enqueue(1); q.dequeue()` returns 1  \n",
        ("Stack", "Queue"),
        [],  # the value is no code span
    ),
    Form(
        "the same checklist, its values in code spans as a brief's list would write them "
        "(written for this test in the form of the one above)",
        "- `s = Stack(); s.push(1); s.peek()` returns `1`\n"
        "- `q = Queue(); q.enqueue(1); q.enqueue(2); q.dequeue()` -> `1`\n"
        "- `l = [1, 2]; l.pop()` -> `2`\n",
        ("Stack", "Queue"),
        [("s.peek()", "1"), ("q.dequeue()", "1")],  # the list alone uses no task code
    ),
    Form(
        "a Python cheat sheet's table of queue methods (public repository, exact-string "
        "search for '`q = Queue(); q.'), its unclosed ``print(`` as found: no statement",
        "| 方法 | 示例 | 结果 |\n|---|---|---|\n"
        "| `q.get()` | `q = Queue(); q.put(1); print(q.get()` | `1` |\n"
        "| `q.full()` | `q = Queue(maxsize = 2); q.put(1); q.put(2); print(q.full())` | `True` |\n",
        ("Queue",),
        [],  # no column says output or result: not a table of examples
    ),
    # --- comment-annotated calls outside a fenced block: not read --------------------------
    Form(
        "github:zhoujin7/casestyle README.rst",
        "    casestyle.camelcase('foo bar baz') # => \"fooBarBaz\"\n"
        "    camelcase('fooBarBaz') # => \"fooBarBaz\"\n",
        ("camelcase",),
        [],
    ),
]


@pytest.mark.parametrize("form", REAL_FORMS, ids=[f.source[:60] for f in REAL_FORMS])
def test_real_world_forms_are_read_as_their_authors_meant(form: Form) -> None:
    found = brief_examples(form.text, form.starter(), form.category)
    assert [(e.call, e.want) for e in found] == form.want


def test_a_table_with_a_column_of_calls_and_an_output_column() -> None:
    brief = (
        '| call | result |\n|---|---|\n| `pad("7", 3)` | `"007"` |\n'
        '| `pad("1234", 3)` | `"1234"` |\n| `pad(x, 3)` | `"00x"` |\n'
    )
    found = brief_examples(brief, "", "feature")
    assert [(e.call, e.want) for e in found] == [
        ('pad("7", 3)', '"007"'),
        ('pad("1234", 3)', '"1234"'),
    ]


def test_a_bugfix_table_counts_only_under_an_expected_column() -> None:
    rows = '|---|---|\n| `pad("7", 3)` | `"07"` |\n'
    starter = "def pad(s, n):\n    return s\n"
    assert brief_examples("| call | output |\n" + rows, starter, "bugfix") == []
    found = brief_examples("| call | expected |\n" + rows, starter, "bugfix")
    assert [(e.call, e.want) for e in found] == [('pad("7", 3)', '"07"')]


def test_a_bugfix_brief_gives_what_it_wants_not_what_it_reports() -> None:
    brief = """## parse_size is off by 1024

`parse_size("1K")` returns `1000`. Steps to reproduce:

```python
>>> parse_size("1K")
1000
```

Expected:

- `parse_size("1K")` -> `1024`
- `parse_size("2M")` → `2097152`

Also `parse_size("0")` should return `0`.
"""
    starter = "def parse_size(text):\n    return 0\n"
    found = brief_examples(brief, starter, "bugfix")
    assert [(e.call, e.want) for e in found] == [
        ('parse_size("1K")', "1024"),
        ('parse_size("2M")', "2097152"),
        ('parse_size("0")', "0"),
    ]


def test_a_value_placed_in_the_present_is_not_an_example_even_outside_a_bugfix() -> None:
    brief = (
        '`add_tag(tag, tags=[])` shares its default, so `add_tag("a")` followed by\n'
        '`add_tag("b")` returns `["a", "b"]` instead of `["b"]`. Today `count(2)` returns\n'
        "`3`. After the change `count(2)` returns `2`.\n"
    )
    found = brief_examples(brief, "def add_tag(t, tags=[]): ...\ndef count(n): ...\n", "refactor")
    assert [(e.call, e.want) for e in found] == [("count(2)", "2")]


def test_a_call_given_two_values_is_no_example() -> None:
    brief = "- `f(1)` -> `2`\n- `f(1)` -> `3`\n- `f(2)` -> `4`\n"
    assert [(e.call, e.want) for e in brief_examples(brief, "", "feature")] == [("f(2)", "4")]


def test_names_must_be_the_modules_own_or_new_ones() -> None:
    brief = "- `len([1, 2])` -> `2`\n- `helper(1)` -> `2`\n- `fresh(1)` -> `2`\n"
    starter = "def helper(x):\n    return x\n"
    feature = [e.call for e in brief_examples(brief, starter, "feature")]
    assert feature == ["helper(1)", "fresh(1)"]  # a builtin is not the task's function
    bugfix = [e.call for e in brief_examples("Expected:\n\n" + brief, starter, "bugfix")]
    assert bugfix == ["helper(1)"]  # a bugfix fixes what exists


def test_examples_wrapped_over_two_lines_are_read() -> None:
    brief = 'With it, `with_query("/a", page=2)` returns\n`"/a?page=2"`, and so on.\n'
    found = brief_examples(brief, "", "feature")
    assert [(e.call, e.want) for e in found] == [('with_query("/a", page=2)', '"/a?page=2"')]


def test_code_fences_hide_headings_and_python_comments() -> None:
    brief = "## Expected\n\n```python\n# What actually happened\nassert f(1) == 2\n```\n"
    starter = "def f(x):\n    return x\n"
    found = brief_examples(brief, starter, "bugfix")
    assert [(e.call, e.want) for e in found] == [("f(1)", "2")]


def test_at_most_twelve_examples() -> None:
    brief = "".join(f"- `f({i})` -> `{i}`\n" for i in range(20))
    assert len(brief_examples(brief, "", "feature")) == 12


def test_a_section_that_reports_the_present_gives_no_examples() -> None:
    feature = "## Usage\n\n- `f(1)` -> `2`\n\n### Current behaviour\n\n- `f(3)` -> `0`\n"
    assert [e.call for e in brief_examples(feature, "", "feature")] == ["f(1)"]
    bugfix = (
        "### Expected behavior\n\n- `f(1)` -> `2`\n\nWhat happens instead:\n\n"
        "- `f(3)` -> `0`\n\n## Examples\n\n- `f(4)` -> `5`\n"
    )
    starter = "def f(x):\n    return 0\n"
    assert [e.call for e in brief_examples(bugfix, starter, "bugfix")] == ["f(1)", "f(4)"]


def test_a_title_that_names_the_bug_opens_no_actual_section() -> None:
    brief = (
        "# Bug: `f()` is off by one\n\n`f(1)` should return `2`.\n\n### Actual\n\n- `f(1)` -> `1`\n"
    )
    starter = "def f(x):\n    return x\n"
    assert [(e.call, e.want) for e in brief_examples(brief, starter, "bugfix")] == [("f(1)", "2")]
    section = "### Bug\n\n`f(1)` should return `2`.\n"  # a section heading, not a title
    assert brief_examples(section, starter, "bugfix") == []


CONFIG_BRIEF = """get_path returns the default for 0

```python
config = {"retries": 0, "servers": [{"host": "a"}, {"host": "b"}]}
```

Expected:

* `get_path(config, "retries", default=3)` should be `0`
* `get_path(config, "servers.1.host")` should be `"b"`
"""


def test_a_block_of_values_gives_its_names_to_the_examples_that_use_them() -> None:
    starter = "def get_path(data, path, default=None):\n    return default\n"
    found = brief_examples(CONFIG_BRIEF, starter, "bugfix")
    data = "{'retries': 0, 'servers': [{'host': 'a'}, {'host': 'b'}]}"
    assert [(e.call, e.want) for e in found] == [
        (f"get_path({data}, 'retries', default=3)", "0"),
        (f"get_path({data}, 'servers.1.host')", '"b"'),
    ]


@pytest.mark.parametrize(
    "code",
    [
        # the block does more than give values: the call may change config
        '```python\nconfig = {"retries": 0}\nload(config)\n```\n',
        # two values for one name: which one the examples mean is not said
        '```python\nconfig = {"retries": 0}\n```\n\n```python\nconfig = {"retries": 1}\n```\n',
        # a doctest line with no value after it names config: it may change it
        '>>> config = {"retries": 0}\n>>> config.clear()\n',
    ],
)
def test_no_given_where_other_code_may_change_it_or_gives_it_another_value(code: str) -> None:
    brief = code + "\nExpected:\n\n* `get_path(config, 'retries')` should be `0`\n"
    assert brief_examples(brief, "def get_path(d, p):\n    return d\n", "bugfix") == []


def test_a_doctest_given_is_read_in_place_of_its_name() -> None:
    doctest = ">>> cache = {'a': 1}\n>>> get(cache, 'a')\n1\n>>> put(cache, 'b', 2)\n"
    assert brief_examples(doctest, "", "feature") == []  # put() may change it
    found = brief_examples(doctest.rsplit(">>> put", 1)[0], "", "feature")
    assert [(e.call, e.want) for e in found] == [("get({'a': 1}, 'a')", "1")]


def test_a_printed_doctest_is_checked_as_the_text_print_shows() -> None:
    brief = "```python\n>>> print(box('hi'))\n+--+\n|hi|   \n+--+\n```\n"
    (found,) = brief_examples(brief, "", "feature")
    assert found.printed and found.call == "box('hi')" and found.want == repr("+--+\n|hi|\n+--+")


def test_a_commented_call_counts_where_its_block_stands_and_only_with_a_whole_value() -> None:
    starter = "def wrap(text, width):\n    return [text]\n"
    block = '```python\nwrap("aaaa", 2)  # -> {}\n```\n'
    brief = (
        "## Actual\n\n" + block.format('["aaaa"]') + "\n## Expected\n\n"
        + block.format('["aa", "aa"]')
        + block.format('["a"] (not possible)')
        + block.format('["aa", "aa"], but got ["aaaa"]')
    )  # fmt: skip
    found = brief_examples(brief, starter, "bugfix")
    assert [(e.call, e.want) for e in found] == [('wrap("aaaa", 2)', '["aa", "aa"]')]
    printed = brief_examples('```python\nprint(wrap("a b", 1))  # output: [1, 2]\n```\n', "", "x")
    assert [(e.call, e.want, e.printed) for e in printed] == [('wrap("a b", 1)', "'[1, 2]'", True)]


def test_a_session_line_is_checked_after_the_lines_before_it() -> None:
    brief = (
        "## Usage\n\n```python\n>>> buf = RingBuffer(2)\n>>> buf.append(1)\n>>> buf.append(2)\n"
        ">>> buf.append(3)\n>>> list(buf)\n[2, 3]\n>>> len(buf), buf.full\n(2, True)\n```\n"
    )
    found = brief_examples(brief, "class MetricsWindow:\n    pass\n", "feature")
    assert [(e.setup, e.call, e.want) for e in found] == [
        (
            ("buf = RingBuffer(2)", "buf.append(1)", "buf.append(2)", "buf.append(3)"),
            "list(buf)",
            "[2, 3]",
        ),
        (
            ("buf = RingBuffer(2)", "buf.append(1)", "buf.append(2)", "buf.append(3)", "list(buf)"),
            "(len(buf), buf.full)",
            "(2, True)",
        ),
    ]
    assert brief_examples(brief, "class RingBuffer:\n    pass\n", "bugfix")  # a wanted section
    assert not brief_examples(brief.replace("## Usage", "## Actual"), "", "feature")
    assert not brief_examples(brief, "", "bugfix")  # a bugfix may only use the starter's names


@pytest.mark.parametrize(
    "session",
    [
        ">>> from statistics import mean\n>>> xs = [1, 2]\n>>> xs.append(3)\n>>> mean(xs)\n2\n",
        ">>> b = RingBuffer(2)\n>>> b.append(10 ** 1000)\n>>> len(b)\n1\n",
        ">>> b = RingBuffer(2)\n>>> b.append(x)\n>>> len(b)\n1\n",
        ">>> import numpy\n>>> b = RingBuffer(2)\n>>> b.append(1)\n>>> len(b)\n1\n",
        ">>> b = RingBuffer(0)\nTraceback (most recent call last):\nValueError\n>>> len(b)\n0\n",
        ">>> b = RingBuffer(2)\n>>> b.append(1)\n>>> b\nRingBuffer([1])\n",
    ],
    ids=["stdlib-shadows-task", "huge-power", "unbound-name", "third-party", "traceback", "repr"],
)
def test_a_session_gives_no_scenario_it_cannot_run_as_written(session: str) -> None:
    assert brief_examples(session, "def mean(xs):\n    pass\n", "feature") == []


def test_a_blockquote_is_read_as_what_it_quotes() -> None:
    """A hint quoted with a fenced doctest in it (the form of a public course's exercise,
    with ``middle`` in place of its builtin ``max``), and an email thread's nested quote
    markers, whose ``>>>`` is a third-level quote, not a prompt: no example."""
    hint = (
        "> **Hint:** combine all the numbers, then take away the ones you do not want.\n"
        ">\n> ```\n> >>> middle(1, 2, 3)\n> 2\n> >>> middle(-1, -2, -3)\n> -2\n> ```\n"
    )
    found = brief_examples(hint, "def middle(a, b, c):\n    pass\n", "feature")
    assert [(e.call, e.want) for e in found] == [
        ("middle(1, 2, 3)", "2"),
        ("middle(-1, -2, -3)", "-2"),
    ]
    thread = "> On 04/27, P. wrote:\n> > \n> >>> Can we extend it?  Adding new APIs is easy.\n"
    assert brief_examples(thread, "def extend(x):\n    pass\n", "feature") == []
    doctest = ">>> middle(1, 2, 3)\n2\n"  # an unquoted prompt keeps its >>>
    assert len(brief_examples(doctest, "def middle(a, b, c):\n    pass\n", "feature")) == 1
