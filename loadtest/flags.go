package loadtest

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// ParseFlags fills a scenario's DefaultConfig from command-line flags; only
// the fields whose `for` tag names the scenario (or "all") are flags, so
// each scenario's -help lists what it reads. It returns flag.ErrHelp after
// printing usage for -h.
func ParseFlags(scenario string, args []string, usage io.Writer) (Config, error) {
	cfg := DefaultConfig(scenario)
	fs := flag.NewFlagSet("loadtest "+scenario, flag.ContinueOnError)
	fs.SetOutput(usage)
	BindFlags(fs, &cfg)
	fs.Usage = func() {
		fmt.Fprintf(usage, "usage: loadtest %s [flags]\n\n%s\n\nflags:\n", scenario, scenarioHelp[scenario])
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("loadtest %s: unexpected arguments %q", scenario, fs.Args())
	}
	return cfg, cfg.Validate()
}

// BindFlags registers the fields of cfg that cfg.Scenario reads on fs.
func BindFlags(fs *flag.FlagSet, cfg *Config) {
	v := reflect.ValueOf(cfg).Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, ok := f.Tag.Lookup("flag")
		if !ok || !forScenario(f.Tag.Get("for"), cfg.Scenario) {
			continue
		}
		bindField(fs, v.Field(i), name, f.Tag.Get("help"))
	}
}

// bindField registers one field with the flag package's own types where
// there is one, so -help shows "-uas int" and the default.
func bindField(fs *flag.FlagSet, fv reflect.Value, name, help string) {
	switch p := fv.Addr().Interface().(type) {
	case *int:
		fs.IntVar(p, name, *p, help)
	case *float64:
		fs.Float64Var(p, name, *p, help)
	case *bool:
		fs.BoolVar(p, name, *p, help)
	case *string:
		fs.StringVar(p, name, *p, help)
	case *time.Duration:
		fs.DurationVar(p, name, *p, help)
	default:
		fs.Var(fieldValue{fv}, name, help)
	}
}

func forScenario(tag, scenario string) bool {
	for s := range strings.SplitSeq(tag, ",") {
		if s == "all" || s == scenario {
			return true
		}
	}
	return false
}

// fieldValue is a flag.Value over one Config field.
type fieldValue struct{ v reflect.Value }

var (
	durationType = reflect.TypeFor[time.Duration]()
	floatsType   = reflect.TypeFor[[]float64]()
)

func (f fieldValue) String() string {
	if !f.v.IsValid() {
		return ""
	}
	switch {
	case f.v.Type() == durationType:
		return time.Duration(f.v.Int()).String()
	case f.v.Type() == floatsType:
		var parts []string
		for _, x := range f.v.Interface().([]float64) {
			parts = append(parts, strconv.FormatFloat(x, 'f', -1, 64))
		}
		return strings.Join(parts, ",")
	case f.v.Kind() == reflect.Slice:
		return strings.Join(f.v.Interface().([]string), ",")
	}
	return fmt.Sprint(f.v.Interface())
}

// IsBoolFlag lets -keep-keyspace stand without a value.
func (f fieldValue) IsBoolFlag() bool { return f.v.IsValid() && f.v.Kind() == reflect.Bool }

func (f fieldValue) Set(s string) error {
	switch {
	case f.v.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		f.v.SetInt(int64(d))
	case f.v.Type() == floatsType:
		var xs []float64
		for _, p := range splitList(s) {
			x, err := strconv.ParseFloat(p, 64)
			if err != nil {
				return err
			}
			xs = append(xs, x)
		}
		f.v.Set(reflect.ValueOf(xs))
	case f.v.Kind() == reflect.Slice:
		f.v.Set(reflect.ValueOf(splitList(s)))
	case f.v.Kind() == reflect.String:
		f.v.SetString(s)
	case f.v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		f.v.SetBool(b)
	case f.v.Kind() == reflect.Int:
		n, err := strconv.Atoi(strings.ReplaceAll(s, "_", ""))
		if err != nil {
			return err
		}
		f.v.SetInt(int64(n))
	case f.v.Kind() == reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		f.v.SetFloat(x)
	default:
		return fmt.Errorf("unsupported kind %s", f.v.Kind())
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// scenarioHelp is the paragraph each scenario's -help starts with.
var scenarioHelp = map[string]string{
	Hold: `hold: -uas idle user agents (hello, -channels registered, then idle
with {} pings every -ping-interval), opened at -connect-rate in -steps
equal steps. After each step and -settle of idleness the engines' RSS is
sampled (/proc/<pid>/status, and go_goroutines from their /metrics); the
least-squares slope over the steps is the engines' user-space bytes per
connection. Then everyone stays connected for -hold.`,
	Notify: `notify: -uas connected user agents; senders POST VAPID-signed,
aes128gcm-encrypted pushes to them at each of -rates (open loop: the
schedule never waits for replies) for -stage-time. User agents decrypt,
check and ack. Latency runs from a push's scheduled send time to its
receipt at the user agent (HDR histogram: p50, p90, p99, p99.9, max).
Stops after the first rate whose p99 passes -p99-limit (once -min-stages
ran).`,
	Stored: `stored: -uas user agents register and go offline; -messages pushes
are sent to them at -push-rate and stored; then everyone reconnects (to
the next engine, when there are several) and drains. Every push answered
201 must arrive exactly once and never after its ack; -verify-reconnect
reconnects everyone once more and expects nothing. Lost pushes are logged
with their message id in the worker logs.`,
	Churn: `churn: -uas user agents connect and disconnect (exponential online
time with mean -session, offline -offline, reconnecting to a random
engine) while pushes flow at -push-rate for -duration to random user
agents, online or not. Then everyone reconnects and drains, with the same
exactly-once accounting as stored.`,
}
