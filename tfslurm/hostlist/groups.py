"""A parsed bracket group of a hostlist, and the text of the hosts it writes.

Each ``[...]`` of an expression becomes one :class:`Group`: the text of its ranges, the
ranges that span several numbers, its host count and the digits its numbers take, so
that the parser can size an item without writing a host. Writing the hosts of a parsed
item (:func:`item_text`, :func:`_range_text`, :func:`item_prefixes`, in Slurm's order) lives
here too, beside the group it reads, because both readers need it: ``expansion`` writes
every host with it, and ``grammar`` writes the hosts of the rare item whose 64-bit check
has too many combinations to reason about (and the group's largest number of each written
length, :func:`written_maxima`, for the other items). Depending on nothing else in the package, this
module is what keeps ``grammar`` and ``expansion`` free of an import cycle.
"""

from __future__ import annotations

import itertools
import operator

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the TaskProlog path)
if TYPE_CHECKING:
    from collections.abc import Sequence

# A range list is kept as tuples (low, high, width): the hosts low..high, each number
# zero-padded to width digits (the length of the low bound's text, as Slurm does).
Range = tuple[int, int, int]


class Group:
    """One bracket group: the text of each range, the ranges that span several numbers,
    its host count and how many digits all its numbers take together.

    Expanding mostly copies the texts (Slurm writes scattered hosts as long lists of
    single numbers): a group of single numbers keeps its bracket's text and splits it only
    when asked for its parts; the (low, high, width) tuples are built only for nth/index_of.
    """

    __slots__ = ("_body", "_cuts", "_joined", "_parts", "_ranges", "_widest", "digits", "size", "spans")

    def __init__(
        self,
        parts: list[str] | None,  # each range's text; a span's part is its low number's text
        spans: list[tuple[int, int, int, int]],  # (index, low, high, width) if low < high
        ranges: list[Range] | None = None,
        body: str | None = None,  # instead of parts: the bracket's text
        cuts: list[tuple[int, int]] | None = None,  # with body: where each span's text is
    ) -> None:
        self._parts = parts
        self._body = body
        self._cuts = cuts or []
        self.spans = spans
        self._ranges = ranges
        self._widest: int | None = None
        self._joined: str | None = None
        if parts is None:
            assert body is not None
            commas = body.count(",")
            self.size = commas + 1 + sum(high - low for _, low, high, _ in spans)
            self.digits = (
                len(body)
                - commas
                - sum(end - start for start, end in self._cuts)
                + sum(span_digits(low, high, width) for _, low, high, width in spans)
            )
        else:
            self.size = len(parts) + sum(high - low for _, low, high, _ in spans)
            # a span adds its numbers' digits less its low's text, counted in parts
            self.digits = sum(map(len, parts)) + spans_digits(spans) - sum(len(parts[s[0]]) for s in spans)

    @property
    def parts(self) -> list[str]:
        if self._parts is None:
            assert self._body is not None
            parts = self._body.split(",")
            for index, _, _, _ in self.spans:
                parts[index] = parts[index].partition("-")[0]
            self._parts = parts
        return self._parts

    @property
    def parts_split(self) -> bool:
        """Whether the parts are split out already; else the group keeps its bracket's text
        (single numbers only) and splits it when asked for them."""
        return self._parts is not None

    @property
    def widest(self) -> int:
        """Digits of the group's longest number (parts hold the low numbers' texts)."""
        if self._widest is None:
            self._widest = max([*map(len, self.parts), *(len(str(high)) for _, _, high, _ in self.spans)])
        return self._widest

    @property
    def ranges(self) -> list[Range]:
        if self._ranges is None:  # only plain groups: numbers of at most 19 digits
            parts = self.parts
            numbers = list(map(int, parts))
            ranges = list(zip(numbers, numbers, map(len, parts), strict=False))
            for index, low, high, width in self.spans:
                ranges[index] = (low, high, width)
            self._ranges = ranges
        return self._ranges

    def numbers(self) -> list[str]:
        """Every number of the group as written, in order."""
        if not self.spans:
            return self.parts
        return self.joined().split(",")

    def joined(self) -> str:
        """Every number of the group as written, joined by ','; kept once written (an
        item of several groups asks for it once per item, and many items share a group)."""
        if self._joined is not None:
            return self._joined
        if not self.spans and self._body is not None:
            return self._body
        if not self.spans:
            joined = ",".join(self.parts)
        elif self._body is not None:  # the bracket's text with each span written out
            pieces: list[str] = []
            done = 0
            for (start, end), (_, low, high, width) in zip(self._cuts, self.spans, strict=False):
                pieces += self._body[done:start], _range_text("", "", low, high, width)[1:]
                done = end
            pieces.append(self._body[done:])
            joined = "".join(pieces)
        else:
            pieces = list(self.parts)
            for index, low, high, width in self.spans:
                pieces[index] = _range_text("", "", low, high, width)[1:]
            joined = ",".join(pieces)
        self._joined = joined
        return joined


def written_maxima(group: Group) -> dict[int, int]:
    """For each length a number of the group is written with, its largest such number."""
    maxima: dict[int, int] = {}
    for _, low, high, width in group.spans:
        if width >= len(str(high)):  # every number written width wide: high is the largest
            if high > maxima.get(width, -1):
                maxima[width] = high
            continue
        for length in range(max(width, len(str(low))), max(width, len(str(high))) + 1):
            value = min(high, 10**length - 1)
            maxima[length] = max(maxima.get(length, value), value)
    parts = group.parts
    if group.spans:  # a span's part is its low number, counted above
        spanned = {index for index, _, _, _ in group.spans}
        parts = [text for index, text in enumerate(parts) if index not in spanned]
    # Numbers written with the same number of digits compare as their texts do, so each
    # length's largest is one C-level max() over the texts of that length.
    lengths = list(map(len, parts))
    for length in set(lengths):
        text = max(itertools.compress(parts, map(operator.eq, lengths, itertools.repeat(length))))
        value = int(text.lstrip("0") or "0")
        maxima[length] = max(maxima.get(length, value), value)
    return maxima


def spans_digits(spans: list[tuple[int, int, int, int]]) -> int:
    """span_digits summed over many spans: C-level for those whose numbers are all
    written ``width`` wide (zero-padded ones, and most others), one call each otherwise."""
    if len(spans) < 64:
        return sum(span_digits(low, high, width) for _, low, high, width in spans)
    _, lows, highs, widths = zip(*spans, strict=True)
    wide = list(map(operator.ge, widths, map(len, map(str, highs))))
    counts = map(operator.sub, map(operator.add, highs, itertools.repeat(1)), lows)
    total: int = sum(itertools.compress(map(operator.mul, counts, widths), wide))
    for index in itertools.compress(range(len(spans)), map(operator.not_, wide)):
        _, low, high, width = spans[index]
        total += span_digits(low, high, width)
    return total


def span_digits(low: int, high: int, width: int) -> int:
    """Characters of the numbers low..high written zero-padded to width, together."""
    high_digits = len(str(high))
    if width >= high_digits:  # all written width wide (most spans: one call per span)
        return (high - low + 1) * width
    total = 0
    digits = len(str(low))
    if digits == high_digits:
        return (high - low + 1) * digits
    start = low
    while start <= high:
        stop = min(high, 10**digits - 1)
        total += (stop - start + 1) * max(width, digits)
        start = stop + 1
        digits += 1
    return total


def item_prefixes(texts: Sequence[str], groups: list[Group]) -> list[str]:
    """Every host's text up to the last group, in Slurm's order.

    Slurm (``_push_range_list`` recursing on the prefix) makes the last group the
    innermost loop, the second-to-last the outermost, then the third-to-last, ..., the
    first group: itertools.product over the earlier groups in reverse order. Each prefix
    is written in one formatting call, so many groups cost no more than their text.
    """
    if len(groups) == 1:
        return [texts[0]]
    template = "%s".join(text.replace("%", "%%") for text in texts[:-1])
    numbers = [group.numbers() for group in reversed(groups[:-1])]
    return [template % combo[::-1] for combo in itertools.product(*numbers)]


def _range_text(prefix: str, tail: str, low: int, high: int, width: int) -> str:
    """``",<prefix><n><tail>"`` for every n in low..high, zero-padded to width.

    Hosts are built as one text and split once (host names never contain ','), and
    long ranges are written a hundred numbers at a time from a template, which makes
    expanding about three times faster than formatting every host on its own.
    """
    # n = 100 * block + r is the block's digits then r as two digits (block 0 has that
    # form only when the width is at least 2); all hosts of a block are equally long, so
    # the first and last blocks are cut to low and high by slicing.
    first = low // 100 if width >= 2 or low >= 100 else 1
    last = high // 100
    if last - first < 2 or "\x00" in prefix or "\x00" in tail:
        if width <= len(str(low)):  # numbers only grow: no padding needed
            return "".join([f",{prefix}{n}{tail}" for n in range(low, high + 1)])
        return "".join([f",{prefix}{n:0{width}d}{tail}" for n in range(low, high + 1)])
    template = _hundred() if not prefix and not tail else _hundred(prefix, tail)
    pad = max(width - 2, 0)
    blocks = [
        template.replace("\x00", str(block).rjust(pad, "0") if block else "0" * pad)
        for block in range(first, last + 1)
    ]
    blocks[-1] = blocks[-1][: (high - last * 100 + 1) * (len(blocks[-1]) // 100)]
    if low < first * 100:  # 1-99 written unpadded: lengths differ
        return _range_text(prefix, tail, low, 99, width) + "".join(blocks)
    blocks[0] = blocks[0][(low - first * 100) * (len(blocks[0]) // 100) :]
    return "".join(blocks)


_HUNDRED: list[str] = []  # _hundred("", ""), the template of a group's own numbers


def _hundred(prefix: str = "", tail: str = "") -> str:
    """``",<prefix><NUL><r><tail>"`` for r = 00..99: a block of _range_text, with the
    block's leading digits to put in place of each NUL."""
    if prefix or tail or not _HUNDRED:
        template = "".join([f",{prefix}\x00{r:02d}{tail}" for r in range(100)])
        if prefix or tail:
            return template
        _HUNDRED.append(template)
    return _HUNDRED[0]


def prefixed_text(prefixes: list[str], numbers: list[str], tail: str) -> str:
    """``host,host,...`` (no leading ','): each prefix with every number and the tail.

    Each prefix's hosts are one join of the numbers with ``tail,prefix`` between them: a
    join copies its pieces, where a replace in a text of numbers pays per match as much
    again (a tenth of expanding ``rack[1-25]-n[001-400]``, with the split the rest).
    """
    return ",".join([p + f"{tail},{p}".join(numbers) + tail for p in prefixes])


def item_text(texts: Sequence[str], groups: list[Group]) -> str:
    """``",host"`` for every host of one parsed item, in Slurm's order."""
    if not groups:
        return "," + ",".join(texts)
    tail = texts[-1]
    group = groups[-1]
    prefixes = item_prefixes(texts, groups)
    if len(prefixes) > 1:
        return "," + prefixed_text(prefixes, group.joined().split(","), tail)
    prefix = prefixes[0]
    between = f"{tail},{prefix}"
    if group._parts is None:  # the bracket's text: plain stretches, and spans written out
        body = group._body
        assert body is not None
        pieces = []
        done = 0
        for (start, end), (_, low, high, width) in zip(group._cuts, group.spans, strict=False):
            if start > done:  # numbers, then the ',' before the span
                pieces.append(f",{prefix}{body[done : start - 1].replace(',', between)}{tail}")
            pieces.append(_range_text(prefix, tail, low, high, width))
            done = end + 1
        if done < len(body):
            pieces.append(f",{prefix}{body[done:].replace(',', between)}{tail}")
        return "".join(pieces)
    written = list(group.parts)
    # A span becomes all its numbers with the prefix and tail between them, so one join
    # writes every host.
    for index, low, high, width in group.spans:
        if high == low + 1:  # a pair (what Slurm writes most): its low is written already
            written[index] = f"{written[index]}{between}{high:0{width}d}"
        elif high - low < 16:  # other short spans: formatted in place
            spec = f"0{width}d"
            written[index] = between.join([format(n, spec) for n in range(low, high + 1)])
        else:
            span = _range_text(prefix, tail, low, high, width)
            written[index] = span[1 + len(prefix) : len(span) - len(tail)]
    return "," + prefix + between.join(written) + tail
