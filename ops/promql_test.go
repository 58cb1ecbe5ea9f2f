package ops_test

import (
	"fmt"
	"strings"
	"testing"
)

// selector is one vector selector of a PromQL expression: a metric name
// and its label matchers.
type selector struct {
	name     string
	matchers []matcher
}

type matcher struct {
	label, op, value string // op: = != =~ !~
}

// queryRefs is what a PromQL expression refers to: its selectors, and
// the labels it groups or matches by (by, without, on, ignoring).
type queryRefs struct {
	selectors []selector
	grouping  []string
}

// promqlKeywords are identifiers that are not metric names when not
// followed by '(' (functions and aggregations always are).
var promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true,
	"offset": true, "group_left": true, "group_right": true}

// aggregations may be followed by a grouping clause before their '('.
var aggregations = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true,
	"stddev": true, "stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true,
	"quantile": true, "limitk": true, "limit_ratio": true}

// groupingWords take a parenthesised list of label names.
var groupingWords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true}

// parsePromQL extracts the selectors of expr. It is not a PromQL parser:
// it knows enough of the lexical structure (strings, range brackets,
// function calls, grouping clauses, numbers) for dashboard queries, and
// reports what it cannot read.
func parsePromQL(expr string) (queryRefs, error) {
	var q queryRefs
	s := expr
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j := skipString(s, i)
			if j < 0 {
				return q, errorf("unterminated string in %q", expr)
			}
			i = j
		case c == '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return q, errorf("unterminated range in %q", expr)
			}
			i += j + 1
		case c == '$': // a Grafana variable
			i++
			for i < len(s) && isIdent(s[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(s) && (isIdent(s[i]) || s[i] == '.') {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			word := s[i:j]
			k := skipSpace(s, j)
			switch {
			case groupingWords[word]:
				if k < len(s) && s[k] == '(' {
					end := strings.IndexByte(s[k:], ')')
					if end < 0 {
						return q, errorf("unterminated %s (...) in %q", word, expr)
					}
					for l := range strings.SplitSeq(s[k+1:k+end], ",") {
						if l = strings.TrimSpace(l); l != "" {
							q.grouping = append(q.grouping, l)
						}
					}
					j = k + end + 1
				}
			case k < len(s) && s[k] == '(', aggregations[word]:
				// a function or aggregation
			case promqlKeywords[word]:
			default:
				sel := selector{name: word}
				if k < len(s) && s[k] == '{' {
					ms, end, err := parseMatchers(s, k)
					if err != nil {
						return q, errorf("%v in %q", err, expr)
					}
					sel.matchers, j = ms, end
				}
				q.selectors = append(q.selectors, sel)
			}
			i = j
		default:
			i++
		}
	}
	return q, nil
}

// parseMatchers reads {label op "value", ...} at s[i] == '{' and returns
// the index after '}'.
func parseMatchers(s string, i int) ([]matcher, int, error) {
	var out []matcher
	i++
	for {
		i = skipSpace(s, i)
		if i < len(s) && s[i] == ',' {
			i++
			continue
		}
		if i < len(s) && s[i] == '}' {
			return out, i + 1, nil
		}
		j := i
		for j < len(s) && isIdent(s[j]) {
			j++
		}
		if j == i {
			return nil, 0, errorf("bad label matcher at %d", i)
		}
		m := matcher{label: s[i:j]}
		j = skipSpace(s, j)
		for _, op := range []string{"=~", "!~", "!=", "="} {
			if strings.HasPrefix(s[j:], op) {
				m.op = op
				break
			}
		}
		if m.op == "" {
			return nil, 0, errorf("no matcher operator at %d", j)
		}
		j = skipSpace(s, j+len(m.op))
		end := skipString(s, j)
		if end < 0 {
			return nil, 0, errorf("bad matcher value at %d", j)
		}
		m.value = unquote(s[j:end])
		out = append(out, m)
		i = end
	}
}

// skipString returns the index after the string literal at s[i], or -1.
func skipString(s string, i int) int {
	if i >= len(s) || (s[i] != '"' && s[i] != '\'' && s[i] != '`') {
		return -1
	}
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1
		}
	}
	return -1
}

func unquote(lit string) string {
	body := lit[1 : len(lit)-1]
	if lit[0] == '`' {
		return body
	}
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		if body[i] == '\\' && i+1 < len(body) {
			i++
		}
		b.WriteByte(body[i])
	}
	return b.String()
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
		i++
	}
	return i
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }

func TestParsePromQL(t *testing.T) {
	q, err := parsePromQL(`sum by (route, code) (rate(x_total{route=~"a|b", code!="5\"00"}[$__rate_interval])) / on (instance) group_left max(y) > bool 2 or z offset 5m`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range q.selectors {
		names = append(names, s.name)
	}
	if strings.Join(names, ",") != "x_total,y,z" {
		t.Fatalf("selectors %v", names)
	}
	if m := q.selectors[0].matchers; len(m) != 2 || m[0] != (matcher{"route", "=~", "a|b"}) || m[1] != (matcher{"code", "!=", `5"00`}) {
		t.Fatalf("matchers %+v", m)
	}
	if strings.Join(q.grouping, ",") != "route,code,instance" {
		t.Fatalf("grouping %v", q.grouping)
	}
	if _, err := parsePromQL(`x{a="b}`); err == nil {
		t.Fatal("unterminated matcher accepted")
	}
}
