"""Tests for gpustack_render.k8s: parsing, canonical formatting and FNV-1a 64."""

from __future__ import annotations

from fractions import Fraction

import pytest

from gpustack_render.k8s import (
    QuantityError,
    fnv1a64_hex,
    format_binary_si_from_mib,
    format_decimal_si,
    memory_label_mib,
    parse_quantity,
    quantity_ceil,
)

Ki, Mi, Gi, Ti, Pi, Ei = (2**n for n in (10, 20, 30, 40, 50, 60))

# ---------------------------------------------------------------------------------------------
# parse_quantity: valid inputs
# ---------------------------------------------------------------------------------------------

VALID = [
    # spec pages (stage3-node.md §3, inputs.md §1, examples.md)
    ("6400k", Fraction(6_400_000)),
    ("6400000", Fraction(6_400_000)),
    ("8M", Fraction(8_000_000)),
    ("1600k", Fraction(1_600_000)),
    ("48k", Fraction(48_000)),
    ("25600", Fraction(25_600)),
    ("65536", Fraction(65_536)),
    ("1k", Fraction(1000)),
    ("1600M", Fraction(1_600_000_000)),
    ("3200k", Fraction(3_200_000)),
    ("16M", Fraction(16_000_000)),
    ("32", Fraction(32)),
    ("20", Fraction(20)),
    ("256", Fraction(256)),
    ("200", Fraction(200)),
    ("24Gi", Fraction(24 * Gi)),
    ("32Gi", Fraction(32 * Gi)),
    ("15Gi", Fraction(15 * Gi)),
    ("80Gi", Fraction(80 * Gi)),
    ("100Gi", Fraction(100 * Gi)),
    ("512Mi", Fraction(512 * Mi)),
    ("2Gi", Fraction(2 * Gi)),
    ("16Gi", Fraction(16 * Gi)),
    ("192Gi", Fraction(192 * Gi)),
    # zero and signs
    ("0", Fraction(0)),
    ("-0", Fraction(0)),
    ("+0", Fraction(0)),
    ("0.0", Fraction(0)),
    ("0e999999", Fraction(0)),
    ("+5", Fraction(5)),
    ("-5", Fraction(-5)),
    ("-1.5Gi", Fraction(-3 * Gi, 2)),
    ("007", Fraction(7)),
    # decimal point forms
    (".5", Fraction(1, 2)),
    ("5.", Fraction(5)),
    ("-.5", Fraction(-1, 2)),
    ("+.5", Fraction(1, 2)),
    ("3.2", Fraction(16, 5)),
    ("0.1", Fraction(1, 10)),
    # decimal SI suffixes
    ("1n", Fraction(1, 10**9)),
    ("1u", Fraction(1, 10**6)),
    ("100m", Fraction(1, 10)),
    ("500m", Fraction(1, 2)),
    ("1500m", Fraction(3, 2)),
    ("1M", Fraction(10**6)),
    ("1G", Fraction(10**9)),
    ("1T", Fraction(10**12)),
    ("1P", Fraction(10**15)),
    ("1E", Fraction(10**18)),
    ("1.5k", Fraction(1500)),
    # binary SI suffixes
    ("2Ki", Fraction(2 * Ki)),
    ("1Mi", Fraction(Mi)),
    ("1.5Gi", Fraction(3 * Gi, 2)),
    ("1Ti", Fraction(Ti)),
    ("1Pi", Fraction(Pi)),
    ("1Ei", Fraction(Ei)),
    (".5Ki", Fraction(512)),
    # exponents
    ("1e3", Fraction(1000)),
    ("1E3", Fraction(1000)),
    ("1e+3", Fraction(1000)),
    ("1e-3", Fraction(1, 1000)),
    ("1.5e2", Fraction(150)),
    ("-2E0", Fraction(-2)),
    ("12e003", Fraction(12_000)),
    # very large values
    ("1e1000", Fraction(10**1000)),
    ("1000E", Fraction(10**21)),
    ("8Ei", Fraction(8 * Ei)),
    ("123456789012345678901234567890", Fraction(123456789012345678901234567890)),
    ("99999999999999999999999999Ei", Fraction(99999999999999999999999999 * Ei)),
]


@pytest.mark.parametrize(("text", "expected"), VALID, ids=[t for t, _ in VALID])
def test_parse_valid_strings(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected
    assert isinstance(parse_quantity(text), Fraction)


NON_STRING = [
    (0, Fraction(0)),
    (32, Fraction(32)),
    (-7, Fraction(-7)),
    (10**30, Fraction(10**30)),
    (0.5, Fraction(1, 2)),
    (0.1, Fraction(1, 10)),
    (3.0, Fraction(3)),
    (-2.25, Fraction(-9, 4)),
    (1e22, Fraction(10**22)),
]


@pytest.mark.parametrize(
    ("value", "expected"), NON_STRING, ids=[f"{type(v).__name__}-{v!r}" for v, _ in NON_STRING]
)
def test_parse_numbers(value: int | float, expected: Fraction) -> None:
    assert parse_quantity(value) == expected


EQUAL_BY_VALUE = [
    ("6400k", "6400000"),
    ("8M", "8000000"),
    ("8M", "8000k"),
    ("1k", "1e3"),
    ("1k", "1E3"),
    ("1k", "1000"),
    ("1Ki", "1024"),
    ("1Gi", "1024Mi"),
    ("500m", "0.5"),
    ("500m", ".5"),
    ("1.5Gi", "1536Mi"),
    ("0", "-0"),
    ("5.", "5"),
    ("1E", "1e18"),
]


@pytest.mark.parametrize(("a", "b"), EQUAL_BY_VALUE, ids=[f"{a}=={b}" for a, b in EQUAL_BY_VALUE])
def test_equality_by_value(a: str, b: str) -> None:
    assert parse_quantity(a) == parse_quantity(b)


def test_plain_int_equals_string() -> None:
    assert parse_quantity(6_400_000) == parse_quantity("6400k")


# ---------------------------------------------------------------------------------------------
# parse_quantity: invalid inputs
# ---------------------------------------------------------------------------------------------

INVALID_STRINGS = [
    "",
    " ",
    "eight",
    "1.2.3",
    "1Kb",
    "1K",
    "1k ",
    " 1k",
    "1 k",
    "1\n",
    "1\t",
    "+",
    "-",
    ".",
    "-.",
    "+-1",
    "--1",
    "1e",
    "1e+",
    "1e3.5",
    "1ee3",
    "1e3k",
    "1kk",
    "1Gib",
    "1gi",
    "1mi",
    "1i",
    "1b",
    "Ki",
    "k",
    "e3",
    "1,5",
    "1_000",
    "0x10",
    "inf",
    "nan",
    "\u0661",  # Arabic-Indic digit one: only ASCII digits count
    "1e1001",
    "1e-1001",
    "1e99999999999",
]


@pytest.mark.parametrize("text", INVALID_STRINGS, ids=[repr(t) for t in INVALID_STRINGS])
def test_parse_invalid_strings(text: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert f'"{text}"' in str(info.value)


def test_invalid_is_value_error() -> None:
    assert issubclass(QuantityError, ValueError)
    with pytest.raises(QuantityError, match=r'^"eight" is not a valid quantity$'):
        parse_quantity("eight")


def test_huge_digit_string_is_error_not_crash() -> None:
    text = "1" * 20_000
    with pytest.raises(QuantityError, match="is not"):
        parse_quantity(text)


INVALID_OTHER = [None, True, False, float("nan"), float("inf"), float("-inf"), [1], {"a": 1}, b"1"]


@pytest.mark.parametrize("value", INVALID_OTHER, ids=[repr(v) for v in INVALID_OTHER])
def test_parse_invalid_non_strings(value: object) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(value)  # type: ignore[arg-type]
    assert repr(value) in str(info.value)


def test_cache_does_not_conflate_bool_with_int() -> None:
    assert parse_quantity("1") == 1
    assert parse_quantity(1) == 1
    with pytest.raises(QuantityError):
        parse_quantity(True)


# ---------------------------------------------------------------------------------------------
# format_decimal_si
# ---------------------------------------------------------------------------------------------

DECIMAL_SI = [
    # stage3-node.md §3.3 table and stage4-chain.md examples
    (6_400_000, "6400k"),
    (8_000_000, "8M"),
    (1_600_000, "1600k"),
    (48_000, "48k"),
    (25_600, "25600"),
    (65_536, "65536"),
    (1000, "1k"),
    (1_600_000_000, "1600M"),
    (3_200_000, "3200k"),
    (16_000_000, "16M"),
    (200, "200"),
    # edge cases
    (0, "0"),
    (1, "1"),
    (10, "10"),
    (100, "100"),
    (999, "999"),
    (1001, "1001"),
    (1_234_000, "1234k"),
    (10_000, "10k"),
    (100_000, "100k"),
    (1_000_000, "1M"),
    (10**9, "1G"),
    (10**12, "1T"),
    (10**15, "1P"),
    (10**18, "1E"),
    (10**19, "10E"),
    (10**21, "1000E"),
    (12 * 10**24, "12000000E"),
    (-1, "-1"),
    (-1000, "-1k"),
    (-6_400_000, "-6400k"),
    (-1_234_000, "-1234k"),
    (-(10**21), "-1000E"),
]


@pytest.mark.parametrize(("value", "expected"), DECIMAL_SI, ids=[str(v) for v, _ in DECIMAL_SI])
def test_format_decimal_si(value: int, expected: str) -> None:
    assert format_decimal_si(value) == expected


ROUND_TRIP = sorted(
    {0, 1, -1, 7, 999, 1000, 1001, 1024, 1536, 2000, 12_345, 100_000, 123_456_000, 2**31, 2**63,
     10**18, 10**18 + 1, 10**21, 10**30, -(10**9), -1_600_000, 25_600, 65_536, 3_200_000}
    | {m * 10**e for m in (1, 2, 5, 12, 64, 128, 999, 1001) for e in range(0, 25)}
    | {-(3 * 10**e) for e in range(0, 22)}
)


@pytest.mark.parametrize("value", ROUND_TRIP, ids=[str(v) for v in ROUND_TRIP])
def test_decimal_si_round_trip(value: int) -> None:
    assert parse_quantity(format_decimal_si(value)) == value


@pytest.mark.parametrize("bad", [True, 1.0, "1", None], ids=repr)
def test_format_decimal_si_rejects_non_int(bad: object) -> None:
    with pytest.raises(TypeError):
        format_decimal_si(bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# quantity_ceil
# ---------------------------------------------------------------------------------------------

CEIL = [
    ("500m", 1),
    ("3.2", 4),
    ("-0.5", 0),
    ("-1.5", -1),
    ("4", 4),
    ("0", 0),
    ("1n", 1),
    ("1999m", 2),
    ("2000m", 2),
    ("32", 32),
    ("1.5Gi", 3 * Gi // 2),
]


@pytest.mark.parametrize(("text", "expected"), CEIL, ids=[t for t, _ in CEIL])
def test_quantity_ceil(text: str, expected: int) -> None:
    result = quantity_ceil(parse_quantity(text))
    assert result == expected
    assert type(result) is int


# ---------------------------------------------------------------------------------------------
# memory labels (stage3-node.md §3.2)
# ---------------------------------------------------------------------------------------------

MEMORY_LABELS = [
    ("80Gi", 81_920),
    ("512Mi", 512),
    ("24Gi", 24_576),
    ("32Gi", 32_768),
    ("15Gi", 15_360),
    ("40Gi", 40_960),
    ("2Gi", 2048),
    ("1Ti", 1_048_576),
    ("1.5Gi", 1536),
    ("0", 0),
    ("1023Ki", 0),
    ("1024Ki", 1),
    ("1Mi", 1),
    ("1048575", 0),
    ("1048576", 1),
    ("2097151", 1),
    ("1G", 953),  # 10**9 bytes / 2**20 = 953.67
    ("80G", 76_293),
    ("24e9", 22_888),
]


@pytest.mark.parametrize(("text", "expected"), MEMORY_LABELS, ids=[t for t, _ in MEMORY_LABELS])
def test_memory_label_mib(text: str, expected: int) -> None:
    assert memory_label_mib(text) == expected


@pytest.mark.parametrize("text", ["-1Gi", "-1", "eight", "", "24 Gi", "24GB"])
def test_memory_label_invalid(text: str) -> None:
    with pytest.raises(QuantityError) as info:
        memory_label_mib(text)
    assert f'"{text}"' in str(info.value)


# ---------------------------------------------------------------------------------------------
# format_binary_si_from_mib (stage3-node.md §3.2)
# ---------------------------------------------------------------------------------------------

BINARY_SI = [
    (24_576, "24Gi"),
    (1536, "2Gi"),
    (40_537, "40Gi"),
    (512, "512Mi"),
    (81_920, "80Gi"),
    (32_768, "32Gi"),
    (15_360, "15Gi"),
    (0, "0"),
    (1, "1Mi"),
    (1023, "1023Mi"),
    (1024, "1Gi"),
    (1535, "1Gi"),  # 1.499 Gi rounds down
    (1537, "2Gi"),
    (15_109, "15Gi"),  # a T4's 15109 MiB
    (1_048_576, "1Ti"),
    (1_572_864, "2Ti"),  # 1.5 Ti rounds half up
    (2**40, "1Ei"),
]


@pytest.mark.parametrize(("mib", "expected"), BINARY_SI, ids=[str(m) for m, _ in BINARY_SI])
def test_format_binary_si_from_mib(mib: int, expected: str) -> None:
    assert format_binary_si_from_mib(mib) == expected


@pytest.mark.parametrize("mib", [512, 1024, 24_576, 81_920, 1_048_576])
def test_binary_si_exact_values_round_trip(mib: int) -> None:
    assert memory_label_mib(format_binary_si_from_mib(mib)) == mib


@pytest.mark.parametrize("bad", [-1, True, 1.5], ids=repr)
def test_format_binary_si_rejects_bad_input(bad: object) -> None:
    with pytest.raises(QuantityError):
        format_binary_si_from_mib(bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# fnv1a64_hex (examples.md §1-2, stage3-node.md §7)
# ---------------------------------------------------------------------------------------------

FNV = [
    ("gpustack--nvidia-l4-linux-amd64", "3a013a0c49722e23"),  # examples.md §1
    ("kubernetes.io/hostname", "87bf574bea2a4f23"),  # examples.md §2
    ("", "cbf29ce484222325"),  # offset basis: no bytes hashed
    ("a", "af63dc4c8601ec8c"),  # published FNV-1a 64 test vector
    ("foobar", "85944171f73967e8"),  # published FNV-1a 64 test vector
    # found once by brute force over 3-letter ASCII strings: top byte is 0x00
    ("bad", "00391e19133920b8"),
]


@pytest.mark.parametrize(("text", "expected"), FNV, ids=[repr(t) for t, _ in FNV])
def test_fnv1a64_hex(text: str, expected: str) -> None:
    assert fnv1a64_hex(text) == expected


def test_fnv1a64_zero_padding() -> None:
    digest = fnv1a64_hex("bad")
    assert len(digest) == 16
    assert digest.startswith("00")
    assert digest == digest.lower()


def test_fnv1a64_topology_profile_names() -> None:
    assert "fnv64-" + fnv1a64_hex("kubernetes.io/hostname") == "fnv64-87bf574bea2a4f23"
    name = "gpustack-fnv64-" + fnv1a64_hex("gpustack--nvidia-l4-linux-amd64")
    assert name == "gpustack-fnv64-3a013a0c49722e23"
    assert len(name) == 31


def test_fnv1a64_multi_level_separator() -> None:
    levels = ["a", "b"]
    joined = "\x00".join(levels)
    assert joined == "a\x00b"
    assert fnv1a64_hex(joined) != fnv1a64_hex("ab")
    assert fnv1a64_hex(joined) != fnv1a64_hex("a\x00b\x00")  # no NUL after the last key
    # order matters: levels are coarsest first
    assert fnv1a64_hex("a\x00b") != fnv1a64_hex("b\x00a")


def test_fnv1a64_hashes_utf8_bytes() -> None:
    # "é" is the two UTF-8 bytes c3 a9; hashing the code point 0xe9 would give af64644c8602d3a4
    assert fnv1a64_hex("é") == "0ac21707b7181e01"
    assert fnv1a64_hex("é") != "af64644c8602d3a4"
