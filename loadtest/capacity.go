package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"
)

// ErrFailed is returned by Capacity when a scenario ran and measured a
// failure (or could not run).
var ErrFailed = errors.New("loadtest: capacity: a scenario failed")

// Profile is the standard capacity profile: what `make capacity` runs on
// the project's machine. Defaults in DefaultProfile.
type Profile struct {
	// Scenarios to run, in order. Default hold, notify, stored, churn.
	Scenarios []string
	// HoldUAs idle user agents, opened at HoldRate per second in
	// HoldSteps steps. Defaults 200,000, 1,500/s, 5.
	HoldUAs   int
	HoldRate  float64
	HoldSteps int
	// NotifyUAs connected user agents and the offered rates. Defaults
	// 10,000 and 100 .. 4,000/s.
	NotifyUAs   int
	NotifyRates []float64
	// StoredUAs receive Messages pushes at StoredRate while offline.
	// Defaults 2,000, 100,000 and 800/s (what one Cassandra node sharing
	// two cores with everything else stores).
	StoredUAs  int
	Messages   int
	StoredRate float64
	// ChurnUAs come and go while ChurnRate pushes per second flow for
	// ChurnTime. Defaults 5,000, 600/s, 170s (102,000 pushes).
	ChurnUAs  int
	ChurnRate float64
	ChurnTime time.Duration
	// Doc is the markdown written. Default "docs/capacity.md".
	Doc string
	// Out holds each scenario's reports and logs. Default
	// "loadtest/out/capacity".
	Out string
	// BinDir, CQLHosts: as Config's.
	BinDir   string
	CQLHosts []string
	// StorageNote describes the CQL server in the document (the make
	// target says what it started). Default "".
	StorageNote string
}

// DefaultProfile returns the defaults documented on Profile.
func DefaultProfile() Profile {
	return Profile{
		Scenarios: slices.Clone(Scenarios),
		HoldUAs:   200000, HoldRate: 1500, HoldSteps: 5,
		NotifyUAs: 10000, NotifyRates: []float64{100, 250, 500, 750, 1000, 2000, 4000},
		StoredUAs: 2000, Messages: 100000, StoredRate: 800,
		ChurnUAs: 5000, ChurnRate: 600, ChurnTime: 170 * time.Second,
		Doc: "docs/capacity.md", Out: "loadtest/out/capacity",
		CQLHosts: DefaultConfig(Hold).CQLHosts,
	}
}

// configs are the profile's runs.
func (p Profile) configs() []Config {
	var out []Config
	for _, s := range p.Scenarios {
		c := DefaultConfig(s)
		c.BinDir, c.CQLHosts, c.Out = p.BinDir, p.CQLHosts, filepath.Join(p.Out, s)
		switch s {
		case Hold:
			c.UAs, c.ConnectRate, c.Steps, c.Settle, c.Hold = p.HoldUAs, p.HoldRate, p.HoldSteps, 15*time.Second, time.Minute
		case Notify:
			c.UAs, c.Rates, c.StageTime, c.Warmup = p.NotifyUAs, p.NotifyRates, 20*time.Second, 5*time.Second
		case Stored:
			c.UAs, c.Messages, c.PushRate, c.Engines = p.StoredUAs, p.Messages, p.StoredRate, 2
		case Churn:
			c.UAs, c.PushRate, c.Duration, c.SessionMean, c.OfflineMean = p.ChurnUAs, p.ChurnRate, p.ChurnTime, 20*time.Second, 5*time.Second
			c.Engines = 2
		}
		c.Command = commandLine(c)
		out = append(out, c)
	}
	return out
}

// commandLine is the loadtest command that makes the same run: the flags
// that differ from the scenario's defaults (output and paths left out).
func commandLine(c Config) string {
	def := DefaultConfig(c.Scenario)
	parts := []string{"go run ./loadtest/cmd/loadtest", c.Scenario}
	v, dv := reflect.ValueOf(c), reflect.ValueOf(def)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, ok := f.Tag.Lookup("flag")
		if !ok || !forScenario(f.Tag.Get("for"), c.Scenario) || slices.Contains([]string{"out", "bin-dir", "cql-hosts", "progress"}, name) {
			continue
		}
		if reflect.DeepEqual(v.Field(i).Interface(), dv.Field(i).Interface()) {
			continue
		}
		parts = append(parts, "-"+name+" "+fieldValue{v.Field(i)}.String())
	}
	return strings.Join(parts, " ")
}

// Capacity runs the standard profile (flags adjust it), writes each
// scenario's reports under -out and the summary document -doc.
func Capacity(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	p := DefaultProfile()
	fs := flag.NewFlagSet("loadtest capacity", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scen := fieldValue{reflect.ValueOf(&p.Scenarios).Elem()}
	fs.Var(scen, "scenarios", "scenarios to run, in order")
	fs.IntVar(&p.HoldUAs, "hold-uas", p.HoldUAs, "hold: idle user agents")
	fs.Float64Var(&p.HoldRate, "hold-rate", p.HoldRate, "hold: connections started per second")
	fs.IntVar(&p.HoldSteps, "hold-steps", p.HoldSteps, "hold: ramp steps")
	fs.IntVar(&p.NotifyUAs, "notify-uas", p.NotifyUAs, "notify: connected user agents")
	fs.Var(fieldValue{reflect.ValueOf(&p.NotifyRates).Elem()}, "notify-rates", "notify: offered rates per second")
	fs.IntVar(&p.StoredUAs, "stored-uas", p.StoredUAs, "stored: user agents")
	fs.IntVar(&p.Messages, "messages", p.Messages, "stored: pushes")
	fs.Float64Var(&p.StoredRate, "stored-rate", p.StoredRate, "stored: pushes per second")
	fs.IntVar(&p.ChurnUAs, "churn-uas", p.ChurnUAs, "churn: user agents")
	fs.Float64Var(&p.ChurnRate, "churn-rate", p.ChurnRate, "churn: pushes per second")
	fs.DurationVar(&p.ChurnTime, "churn-time", p.ChurnTime, "churn: how long pushes flow")
	fs.StringVar(&p.Doc, "doc", p.Doc, "markdown summary to write")
	fs.StringVar(&p.Out, "out", p.Out, "directory for each scenario's reports")
	fs.StringVar(&p.BinDir, "bin-dir", p.BinDir, "directory with the service binaries (empty: go build them)")
	fs.Var(fieldValue{reflect.ValueOf(&p.CQLHosts).Elem()}, "cql-hosts", "shared CQL storage host:port,... (default $CQL_HOSTS)")
	fs.StringVar(&p.StorageNote, "storage-note", p.StorageNote, "what the CQL server is, for the document")
	reuse := fs.Bool("reuse", true, "complete the document with the last reports (under -out) of the scenarios not run now")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: loadtest capacity [flags]\n\nRuns the standard profile (hold, notify, stored, churn) and writes %s.\n"+
			"-scenarios \"\" runs nothing and rewrites the document from the last reports.\n\nflags:\n", p.Doc)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	// The binaries are built (or were, by make capacity) from the tree as
	// it is now; it may change while the profile runs.
	commit := gitDescribe()
	cfgs := p.configs()
	for i := range cfgs {
		cfgs[i].Commit = commit
	}
	for _, c := range cfgs {
		if err := c.Validate(); err != nil {
			return fmt.Errorf("loadtest: capacity: %s: %w", c.Scenario, err)
		}
	}
	var reps []*Report
	var errs []error
	ran := map[string]*Report{}
	for _, c := range cfgs {
		fmt.Fprintf(stderr, "\n== capacity: %s\n", c.Command)
		rep, err := Run(ctx, c, stdout, stderr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Scenario, err))
			if ctx.Err() != nil {
				break
			}
		}
		if rep != nil {
			ran[c.Scenario] = rep
		}
	}
	for _, s := range Scenarios {
		switch rep, err := ran[s], error(nil); {
		case rep != nil:
			reps = append(reps, rep)
		case *reuse && !slices.Contains(p.Scenarios, s):
			if rep, err = readReport(filepath.Join(p.Out, s, s+".json")); err == nil {
				reps = append(reps, rep)
			} else if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	doc, err := capacityDoc(p, reps, errs)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p.Doc, doc, 0o644); err != nil {
		return fmt.Errorf("loadtest: capacity: %w", err)
	}
	fmt.Fprintf(stdout, "\nwrote %s\n", p.Doc)
	for _, r := range reps {
		if !r.Pass {
			errs = append(errs, fmt.Errorf("%s: %s", r.Scenario, strings.Join(r.Problems, "; ")))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrFailed, errors.Join(errs...))
	}
	return nil
}

// readReport loads a report a previous run wrote.
func readReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("loadtest: %s: %w", path, err)
	}
	return &r, nil
}

// gitDescribe names the commit measured (and whether the tree differed).
func gitDescribe() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		rev += " with uncommitted changes"
	}
	return rev
}
