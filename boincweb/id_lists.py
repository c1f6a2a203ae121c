"""Lists of row ids given in a query string, as the lab's and the worlds' compare pages take
them (``?runs=1,2``, ``?worlds=3,4``)."""

NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
# Longer strings of digits overflow a database's integer column (a 500 on PostgreSQL).
MAX_ID_DIGITS = 11


def parse_ids(raw: str, *, noun: str, example: str, minimum: int, maximum: int) -> list[int] | str:
    """The ids of a comma-separated ``raw``, in order, or a sentence saying what is wrong with
    them. ``noun`` names a row ("run"), ``example`` is a URL that works."""
    parts = [p.strip() for p in (raw or "").split(",") if p.strip()]
    if len(parts) < minimum:
        return f"Give {NUMBER_WORDS[minimum]} to {NUMBER_WORDS[maximum]} {noun} ids to compare, as {example}."
    if len(parts) > maximum:
        return f"Compare at most {maximum} {noun}s at once, not {len(parts)}."
    if not all(p.isdigit() and len(p) <= MAX_ID_DIGITS for p in parts):
        return f"{noun.capitalize()} ids are whole numbers separated by commas, not {raw!r}."
    ids = [int(p) for p in parts]
    if len(set(ids)) != len(ids):
        return f"Each {noun} may appear once in a comparison."
    return ids
