package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/autopush-go/autopush/internal/settings"
	"github.com/autopush-go/autopush/loadtest/report"
	"github.com/autopush-go/autopush/loadtest/scenario"
)

// ErrFailed is returned by Capacity when a scenario ran and measured a
// failure (or could not run).
var ErrFailed = errors.New("loadtest: capacity: a scenario failed")

// Profile is the standard capacity profile: what `make capacity` runs on
// the project's machine. Defaults in DefaultProfile; each field's `conf` tag
// is its flag (internal/settings).
type Profile struct {
	// Scenarios to run, in order. Default hold, notify, stored, churn.
	Scenarios []string `conf:"scenarios" help:"scenarios to run, in order"`
	// HoldUAs idle user agents, opened at HoldRate per second in
	// HoldSteps steps. Defaults 200,000, 1,500/s, 5.
	HoldUAs   int     `conf:"hold-uas" help:"hold: idle user agents"`
	HoldRate  float64 `conf:"hold-rate" help:"hold: connections started per second"`
	HoldSteps int     `conf:"hold-steps" help:"hold: ramp steps"`
	// NotifyUAs connected user agents and the offered rates. Defaults
	// 10,000 and 100 .. 4,000/s.
	NotifyUAs   int       `conf:"notify-uas" help:"notify: connected user agents"`
	NotifyRates []float64 `conf:"notify-rates" help:"notify: offered rates per second"`
	// StoredUAs receive Messages pushes at StoredRate while offline.
	// Defaults 2,000, 100,000 and 800/s (what one Cassandra node sharing
	// two cores with everything else stores).
	StoredUAs  int     `conf:"stored-uas" help:"stored: user agents"`
	Messages   int     `conf:"messages" help:"stored: pushes"`
	StoredRate float64 `conf:"stored-rate" help:"stored: pushes per second"`
	// ChurnUAs come and go while ChurnRate pushes per second flow for
	// ChurnTime. Defaults 5,000, 600/s, 170s (102,000 pushes).
	ChurnUAs  int           `conf:"churn-uas" help:"churn: user agents"`
	ChurnRate float64       `conf:"churn-rate" help:"churn: pushes per second"`
	ChurnTime time.Duration `conf:"churn-time" help:"churn: how long pushes flow"`
	// Doc is the markdown written. Default "docs/capacity.md".
	Doc string `conf:"doc" help:"markdown summary to write"`
	// Out holds each scenario's reports and logs. Default
	// "loadtest/out/capacity".
	Out string `conf:"out" help:"directory for each scenario's reports"`
	// BinDir, CQLHosts: as Config's.
	BinDir   string   `conf:"bin-dir" help:"directory with the service binaries (empty: go build them)"`
	CQLHosts []string `conf:"cql-hosts" help:"shared CQL storage host:port,... (default $CQL_HOSTS)"`
	// StorageNote describes the CQL server in the document (the make
	// target says what it started). Default "".
	StorageNote string `conf:"storage-note" help:"what the CQL server is, for the document"`
}

// DefaultProfile returns the defaults documented on Profile.
func DefaultProfile() Profile {
	return Profile{
		Scenarios: slices.Clone(scenario.CapacityNames),
		HoldUAs:   200000, HoldRate: 1500, HoldSteps: 5,
		NotifyUAs: 10000, NotifyRates: []float64{100, 250, 500, 750, 1000, 2000, 4000},
		StoredUAs: 2000, Messages: 100000, StoredRate: 800,
		ChurnUAs: 5000, ChurnRate: 600, ChurnTime: 170 * time.Second,
		Doc: "docs/capacity.md", Out: "loadtest/out/capacity",
		CQLHosts: scenario.Default(scenario.Hold).CQLHosts,
	}
}

// configs are the profile's runs.
func (p Profile) configs() []scenario.Config {
	var out []scenario.Config
	for _, s := range p.Scenarios {
		c := scenario.Default(s)
		c.BinDir, c.CQLHosts, c.Out = p.BinDir, p.CQLHosts, filepath.Join(p.Out, s)
		switch s {
		case scenario.Hold:
			c.UAs, c.ConnectRate, c.Steps, c.Settle, c.Hold = p.HoldUAs, p.HoldRate, p.HoldSteps, 15*time.Second, time.Minute
		case scenario.Notify:
			c.UAs, c.Rates, c.StageTime, c.Warmup = p.NotifyUAs, p.NotifyRates, 20*time.Second, 5*time.Second
		case scenario.Stored:
			c.UAs, c.Messages, c.PushRate, c.Engines = p.StoredUAs, p.Messages, p.StoredRate, 2
		case scenario.Churn:
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
func commandLine(c scenario.Config) string {
	def := settings.Describe(ptr(scenario.Default(c.Scenario)), "")
	parts := []string{"go run ./loadtest/cmd/loadtest", c.Scenario}
	reads := scenario.ReadBy(c.Scenario)
	for i, s := range settings.Describe(&c, "") {
		if !reads(s.Tag) || s.Default == def[i].Default || slices.Contains([]string{"out", "bin-dir", "cql-hosts", "progress"}, s.Name) {
			continue
		}
		parts = append(parts, "-"+s.Name+" "+s.Default)
	}
	return strings.Join(parts, " ")
}

func ptr[T any](v T) *T { return &v }

// Capacity runs the standard profile (flags adjust it), writes each
// scenario's reports under -out and the summary document -doc.
// keptSections starts what make capacity keeps of docs/capacity.md: the
// sections written by hand from other targets' runs.
const keptSections = "<!-- kept by make capacity: runs of other targets -->"

func Capacity(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	p := DefaultProfile()
	fs := flag.NewFlagSet("loadtest capacity", flag.ContinueOnError)
	fs.SetOutput(stderr)
	settings.Flags(fs, &p, nil)
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
		if !slices.Contains(scenario.CapacityNames, cfgs[i].Scenario) {
			return fmt.Errorf("loadtest: capacity: %q is not a capacity scenario (%s)", cfgs[i].Scenario, strings.Join(scenario.CapacityNames, ", "))
		}
		cfgs[i].Commit = commit
	}
	for _, c := range cfgs {
		if err := c.Validate(); err != nil {
			return fmt.Errorf("loadtest: capacity: %s: %w", c.Scenario, err)
		}
	}
	var reps []*report.Report
	var errs []error
	ran := map[string]*report.Report{}
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
	for _, s := range scenario.CapacityNames {
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
	doc, err := report.CapacityDoc(p.Out, p.StorageNote, reps, errs)
	if err != nil {
		return err
	}
	// Runs of other targets (make stall) keep their sections, from the
	// first such heading on.
	if old, err := os.ReadFile(p.Doc); err == nil {
		if i := bytes.Index(old, []byte(keptSections)); i >= 0 {
			doc = append(append(doc, '\n'), old[i:]...)
		}
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
func readReport(path string) (*report.Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r report.Report
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
