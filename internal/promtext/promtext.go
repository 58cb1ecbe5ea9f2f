package promtext

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Sample is one sample line.
type Sample struct {
	// Series is the name with its labels as served, e.g.
	// `autoconnect_errors_total{kind="storage"}`: the key Parse uses.
	Series string
	Name   string
	Labels map[string]string
	Value  float64
}

// ParseLine reads one sample line; false when it is not one.
func ParseLine(line string) (Sample, bool) {
	line = strings.TrimSpace(line)
	end := strings.IndexAny(line, "{ ")
	if end <= 0 || line[0] == '#' {
		return Sample{}, false
	}
	s := Sample{Name: line[:end], Labels: map[string]string{}}
	rest := line[end:]
	if rest[0] == '{' {
		var ok bool
		if rest, ok = s.labels(rest[1:]); !ok {
			return Sample{}, false
		}
	}
	s.Series = line[:len(line)-len(rest)]
	fields := strings.Fields(rest)
	if len(fields) < 1 || len(fields) > 2 {
		return Sample{}, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return Sample{}, false
	}
	s.Value = v
	return s, true
}

// labels reads `name="value",...}` into s.Labels and returns what follows.
func (s *Sample) labels(rest string) (string, bool) {
	for {
		rest = strings.TrimLeft(rest, ", ")
		if after, ok := strings.CutPrefix(rest, "}"); ok {
			return after, true
		}
		eq := strings.Index(rest, `="`)
		if eq <= 0 {
			return rest, false
		}
		name := rest[:eq]
		rest = rest[eq+2:]
		var v strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
				if rest[i] == 'n' {
					v.WriteByte('\n')
					continue
				}
			}
			v.WriteByte(rest[i])
		}
		if i == len(rest) {
			return rest, false
		}
		s.Labels[name] = v.String()
		rest = rest[i+1:]
	}
}

// ParseAll reads every sample line of r; a line that is neither a sample,
// a comment nor blank is an error.
func ParseAll(r io.Reader) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, ok := ParseLine(line)
		if !ok {
			return nil, fmt.Errorf("promtext: unreadable line %q", line)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// Parse reads r into series -> value (see Sample.Series).
func Parse(r io.Reader) (map[string]float64, error) {
	samples, err := ParseAll(r)
	if err != nil {
		return nil, err
	}
	m := make(map[string]float64, len(samples))
	for _, s := range samples {
		m[s.Series] = s.Value
	}
	return m, nil
}

// Scrape GETs url (a /metrics page) with client (http.DefaultClient if
// nil) and parses it.
func Scrape(ctx context.Context, client *http.Client, url string) (map[string]float64, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("promtext: %s: HTTP %d", url, resp.StatusCode)
	}
	return Parse(resp.Body)
}
