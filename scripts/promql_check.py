"""A PromQL parser that checks an expression against the series an exporter writes: every metric
name exists, and every label a matcher, by (...), without (...), on (...), group_left (...),
histogram_quantile (le) or label_replace/label_join reads exists on the series it is applied to.
scripts/check-dashboard.py uses it; python3 standard library only."""

import difflib
import re

# Labels Prometheus attaches to every series scraped through the shipped ServiceMonitor
# (examples/prometheus/servicemonitor.yaml adds `node` with a relabeling; the operator adds the
# rest; examples/prometheus/scrape-config.yaml adds a subset of them).
TARGET_LABELS = ("job", "instance", "namespace", "pod", "container", "node", "service", "endpoint")

AGGREGATORS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
               "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
PARAM_AGGREGATORS = {"count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
FUNCTIONS = {
    "abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh",
    "avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos", "cosh",
    "count_over_time", "days_in_month", "day_of_month", "day_of_week", "day_of_year", "deg",
    "delta", "deriv", "exp", "floor", "histogram_avg", "histogram_count", "histogram_fraction",
    "histogram_quantile", "histogram_stddev", "histogram_stdvar", "histogram_sum",
    "double_exponential_smoothing", "holt_winters", "hour", "idelta", "increase", "irate",
    "label_join", "label_replace", "last_over_time", "ln", "log10", "log2", "mad_over_time",
    "max_over_time", "min_over_time", "minute", "month", "pi", "predict_linear",
    "present_over_time", "quantile_over_time", "rad", "rate", "resets", "round", "scalar", "sgn",
    "sin", "sinh", "sort", "sort_desc", "sort_by_label", "sort_by_label_desc", "sqrt",
    "stddev_over_time", "stdvar_over_time", "sum_over_time", "tan", "tanh", "time", "timestamp",
    "vector", "year"}
SCALAR_FUNCTIONS = {"time", "pi", "scalar"}
# Functions that return time parts; with no argument they are scalars-as-vectors of vector(time()).
TIME_FUNCTIONS = {"days_in_month", "day_of_month", "day_of_week", "day_of_year", "hour",
                  "minute", "month", "year"}
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
            "group_right", "bool", "offset", "atan2"}

class CheckError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# PromQL


TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<duration>(?:\d+(?:ms|s|m|h|d|w|y))+(?![a-zA-Z0-9_]))
  | (?P<number>(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[iI]nf|NaN)(?![a-zA-Z0-9_]))
  | (?P<ident>[a-zA-Z_][a-zA-Z0-9_:]*)
  | (?P<op>=~|!~|==|!=|<=|>=|[-+*/%^<>=(){}\[\],:@])
""", re.X)


class Tok:
    __slots__ = ("kind", "text", "pos")

    def __init__(self, kind, text, pos):
        self.kind, self.text, self.pos = kind, text, pos

    def __repr__(self):
        return "%s(%r)" % (self.kind, self.text)


def tokenize(src):
    toks, pos = [], 0
    while pos < len(src):
        m = TOKEN_RE.match(src, pos)
        if not m:
            raise CheckError("cannot tokenise at %r" % src[pos:pos + 20])
        kind = m.lastgroup
        if kind not in ("ws", "comment"):
            toks.append(Tok(kind, m.group(), pos))
        pos = m.end()
    toks.append(Tok("eof", "", pos))
    return toks


class Value:
    """What an expression evaluates to: kind (vector, matrix, scalar, string) and the label names
    its series can carry (None: unknown, nothing is checked against it), plus the metrics used."""

    def __init__(self, kind, labels=None, metrics=()):
        self.kind, self.labels, self.metrics = kind, labels, tuple(metrics)
        self.text = None  # a string literal's value


BIN_PREC = [({"or"}, 1), ({"and", "unless"}, 2), ({"==", "!=", "<=", "<", ">=", ">"}, 3),
            ({"+", "-"}, 4), ({"*", "/", "%", "atan2"}, 5), ({"^"}, 6)]


def bin_prec(text):
    for ops, p in BIN_PREC:
        if text in ops:
            return p
    return None


class Parser:
    def __init__(self, src, catalog, problems):
        self.src = src
        self.toks = tokenize(src)
        self.i = 0
        self.catalog = catalog
        self.problems = problems   # list of strings, appended to
        self.metrics = []

    # --- helpers
    def peek(self, k=0):
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self):
        t = self.toks[self.i]
        self.i = min(self.i + 1, len(self.toks) - 1)
        return t

    def accept(self, text):
        if self.peek().text == text and self.peek().kind != "string":
            return self.next()
        return None

    def expect(self, text):
        t = self.next()
        if t.text != text or t.kind == "string":
            raise CheckError("expected %r at offset %d, found %r" % (text, t.pos, t.text or "end"))
        return t

    def problem(self, msg):
        if msg not in self.problems:
            self.problems.append(msg)

    def need_labels(self, value, labels, where):
        """Every label in labels must exist on the series behind value."""
        if value.labels is None:
            return
        for l in labels:
            if l in TARGET_LABELS and "exported_" + l in value.labels:
                self.problem("label %r in %s is the scrape target's (the gpuscale pod's) on %s; "
                             "the series' own %s is exported_%s (honorLabels: false)" % (
                                 l, where, " / ".join(sorted(set(value.metrics))), l, l))
            elif l not in value.labels:
                self.problem("label %r in %s does not exist on the series it is applied to "
                             "(from %s; labels there: %s)" % (
                    l, where, " / ".join(sorted(set(value.metrics))) or "this expression",
                    ", ".join(sorted(value.labels - {"__name__"})) or "none"))

    # --- grammar
    def parse(self):
        v = self.expr(0)
        if self.peek().kind != "eof":
            raise CheckError("unexpected %r at offset %d" % (self.peek().text, self.peek().pos))
        return v

    def expr(self, min_prec):
        left = self.unary()
        while True:
            t = self.peek()
            p = bin_prec(t.text) if t.kind in ("op", "ident") else None
            if p is None or p < min_prec:
                break
            self.next()
            left = self.binary(t.text, left, p)
        return left

    def binary(self, op, left, prec):
        self.accept("bool")
        on = ignoring = None
        group, extra = None, ()
        if self.peek().text in ("on", "ignoring"):
            kw = self.next().text
            lst = self.label_list()
            on, ignoring = (lst, None) if kw == "on" else (None, lst)
            if self.peek().text in ("group_left", "group_right"):
                group = self.next().text
                extra = self.label_list() if self.peek().text == "(" else ()
        # ^ is right-associative, the others left-associative.
        right = self.expr(prec if op == "^" else prec + 1)
        metrics = left.metrics + right.metrics
        if left.kind == "scalar" or right.kind == "scalar":
            keep = right if left.kind == "scalar" else left
            return Value("scalar" if keep.kind == "scalar" else "vector", keep.labels, metrics)
        if on is not None:
            self.need_labels(left, on, "on (...)")
            self.need_labels(right, on, "on (...)")
        if ignoring is not None and left.labels is not None and right.labels is not None:
            for l in ignoring:
                if l not in left.labels and l not in right.labels:
                    self.need_labels(left, [l], "ignoring (...)")
        if group == "group_left":
            self.need_labels(right, extra, "group_left (...)")
            labels = None if left.labels is None else left.labels | set(extra)
        elif group == "group_right":
            self.need_labels(left, extra, "group_right (...)")
            labels = None if right.labels is None else right.labels | set(extra)
        elif op == "or":
            labels = None if left.labels is None or right.labels is None else \
                left.labels | right.labels
        else:
            labels = left.labels
        return Value("vector", labels, metrics)

    def label_list(self):
        self.expect("(")
        out = []
        while not self.accept(")"):
            t = self.next()
            if t.kind not in ("ident", "string"):
                raise CheckError("expected a label name at offset %d, found %r" % (t.pos, t.text))
            out.append(t.text.strip("\"'`") if t.kind == "string" else t.text)
            if not self.accept(","):
                self.expect(")")
                break
        return out

    def unary(self):
        if self.peek().text in ("-", "+") and self.peek().kind == "op":
            self.next()
            return self.unary()
        return self.postfix(self.primary())

    def postfix(self, v):
        while True:
            if self.peek().text == "[":
                self.next()
                self.duration()
                if self.accept(":"):
                    if self.peek().text != "]":
                        self.duration()
                    self.expect("]")
                    v = Value("matrix", v.labels, v.metrics)  # subquery
                else:
                    self.expect("]")
                    if v.kind != "vector":
                        raise CheckError("a range [..] needs a series selector")
                    v = Value("matrix", v.labels, v.metrics)
            elif self.peek().text == "offset":
                self.next()
                self.accept("-")
                self.duration()
            elif self.peek().text == "@":
                self.next()
                t = self.next()
                if t.text in ("start", "end"):
                    self.expect("(")
                    self.expect(")")
            else:
                return v

    def duration(self):
        t = self.next()
        if t.kind not in ("duration", "number"):
            raise CheckError("expected a duration at offset %d, found %r" % (t.pos, t.text))

    def primary(self):
        t = self.peek()
        if t.kind == "number":
            self.next()
            return Value("scalar", set())
        if t.kind == "duration":  # a bare duration is a number of seconds in newer PromQL
            self.next()
            return Value("scalar", set())
        if t.kind == "string":
            self.next()
            v = Value("string", set())
            v.text = t.text[1:-1]
            return v
        if t.text == "(":
            self.next()
            v = self.expr(0)
            self.expect(")")
            return v
        if t.text == "{":
            return self.selector(None)
        if t.kind == "ident":
            name = t.text
            if name in AGGREGATORS and self.peek(1).text in ("(", "by", "without"):
                return self.aggregation()
            if name in FUNCTIONS and self.peek(1).text == "(":
                return self.function()
            if self.peek(1).text == "(":
                raise CheckError("unknown function %r" % name)
            if name in KEYWORDS:
                raise CheckError("unexpected keyword %r at offset %d" % (name, t.pos))
            self.next()
            return self.selector(name)
        raise CheckError("unexpected %r at offset %d" % (t.text or "end", t.pos))

    def selector(self, name):
        matchers = []
        if self.accept("{"):
            while not self.accept("}"):
                lt = self.next()
                if lt.kind not in ("ident", "string"):
                    raise CheckError("expected a label name at offset %d, found %r"
                                     % (lt.pos, lt.text))
                op = self.next()
                if op.text not in ("=", "!=", "=~", "!~"):
                    raise CheckError("expected a matcher operator at offset %d" % op.pos)
                val = self.next()
                if val.kind != "string":
                    raise CheckError("expected a quoted label value at offset %d" % val.pos)
                matchers.append((lt.text.strip("\"'`"), op.text, val.text[1:-1]))
                if not self.accept(","):
                    self.expect("}")
                    break
        for l, op, val in matchers:
            if l == "__name__":
                if op == "=" and name is None:
                    name = val
                elif name is None:
                    self.problem("a selector matches __name__ %s %r: its series cannot be "
                                 "verified; name the metric" % (op, val))
                    return Value("vector", None)
        if name is None:
            self.problem("a selector without a metric name: its series cannot be verified")
            return Value("vector", None)
        self.metrics.append(name)
        info = self.catalog.get(name)
        if info is None:
            close = difflib.get_close_matches(name, list(self.catalog), n=1)
            self.problem("unknown series %s: gpuscale does not export it%s" % (
                name, " (did you mean %s?)" % close[0] if close else ""))
            return Value("vector", None, [name])
        labels = info["labels"] if info["known"] else None
        v = Value("vector", labels, [name])
        if labels is None:
            used = [l for l, _, _ in matchers if l != "__name__"]
            if used:
                self.problem("series %s has no sample in the mock scrape, so its labels (%s) "
                             "cannot be verified" % (name, ", ".join(used)))
        else:
            # A matcher that can match the empty string (l="", l!~".+", l=~".*") also selects
            # series without the label: still, the label must exist on the series at all.
            self.need_labels(v, [l for l, _, _ in matchers], "a matcher")
        return v

    def args(self):
        self.expect("(")
        out = []
        if self.accept(")"):
            return out
        while True:
            out.append(self.expr(0))
            if self.accept(")"):
                return out
            self.expect(",")

    def function(self):
        name = self.next().text
        args = self.args()
        strs = [getattr(a, "text", "") for a in args if a.kind == "string"]
        vec = next((a for a in args if a.kind in ("vector", "matrix")), None)
        metrics = tuple(m for a in args for m in a.metrics)
        if name in SCALAR_FUNCTIONS:
            return Value("scalar", set(), metrics)
        if name == "vector":
            return Value("vector", set(), metrics)
        if name in ("absent", "absent_over_time"):
            return Value("vector", None, metrics)
        if vec is None:
            return Value("vector", set(), metrics)
        if name == "histogram_quantile" or name == "histogram_fraction":
            if vec.kind == "vector" and vec.labels is not None:
                self.need_labels(vec, ["le"], name + "()")
            labels = None if vec.labels is None else vec.labels - {"le"}
            return Value("vector", labels, metrics)
        if name == "label_replace":
            # label_replace(v, dst, replacement, src, regex)
            if len(strs) >= 3 and strs[2]:
                self.need_labels(vec, [strs[2]], "label_replace() source")
            labels = None if vec.labels is None else vec.labels | {strs[0]}
            return Value("vector", labels, metrics)
        if name == "label_join":
            if len(strs) >= 3:
                self.need_labels(vec, strs[2:], "label_join() sources")
            labels = None if vec.labels is None else vec.labels | {strs[0]}
            return Value("vector", labels, metrics)
        if name in ("sort_by_label", "sort_by_label_desc"):
            self.need_labels(vec, strs, name + "()")
        return Value("vector", vec.labels, metrics)

    def aggregation(self):
        name = self.next().text
        clause, lst = None, None
        if self.peek().text in ("by", "without"):
            clause = self.next().text
            lst = self.label_list()
        self.expect("(")
        param = None
        if name in PARAM_AGGREGATORS:
            param = self.expr(0)
            self.expect(",")
        inner = self.expr(0)
        self.expect(")")
        if clause is None and self.peek().text in ("by", "without"):
            clause = self.next().text
            lst = self.label_list()
        if inner.kind not in ("vector",):
            raise CheckError("%s() needs an instant vector" % name)
        metrics = inner.metrics
        if clause == "by":
            self.need_labels(inner, lst, "%s by (...)" % name)
            labels = set(lst)
        elif clause == "without":
            self.need_labels(inner, lst, "%s without (...)" % name)
            labels = None if inner.labels is None else inner.labels - set(lst) - {"__name__"}
        else:
            labels = set()
        if name in ("topk", "bottomk", "limitk", "limit_ratio"):
            labels = inner.labels
        if name == "count_values" and param is not None:
            labels = None if labels is None else labels | {"__count_values__"}
        return Value("vector", labels, metrics)


def check_promql(expr, catalog):
    """(metrics used, problems) for one expression."""
    problems = []
    try:
        p = Parser(expr, catalog, problems)
        p.parse()
    except CheckError as e:
        problems.append("cannot parse %r: %s" % (expr, e))
        return [], problems
    return p.metrics, problems
