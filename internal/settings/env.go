package settings

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Env is the environment Load reads: a variable by name, and the names of
// all that are set, so that a PREFIX__ variable naming no setting (a typo
// in an env file) stops the start instead of being ignored.
type Env interface {
	Lookup(name string) (string, bool)
	Names() []string
}

// OSEnv is the process's environment.
func OSEnv() Env { return osEnv{} }

type osEnv struct{}

func (osEnv) Lookup(name string) (string, bool) { return os.LookupEnv(name) }

func (osEnv) Names() []string {
	var names []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	return names
}

// MapEnv is an environment holding m's variables (tests, env files).
func MapEnv(m map[string]string) Env { return mapEnv(m) }

type mapEnv map[string]string

func (m mapEnv) Lookup(name string) (string, bool) { v, ok := m[name]; return v, ok }

func (m mapEnv) Names() []string {
	var names []string
	for k := range m {
		names = append(names, k)
	}
	return names
}

// WithAlias is env where a setting's PREFIX__NAME, when not set, is read
// as ALIAS__NAME (autoendpoint reads AUTOEND__ and AUTOENDPOINT__). Load
// refuses an unknown ALIAS__ variable as it does a PREFIX__ one.
func WithAlias(env Env, prefix, alias string) Env { return aliasEnv{env, prefix, alias} }

type aliasEnv struct {
	Env
	prefix, alias string
}

func (a aliasEnv) Lookup(name string) (string, bool) {
	if v, ok := a.Env.Lookup(name); ok {
		return v, true
	}
	if rest, ok := strings.CutPrefix(name, a.prefix+"__"); ok {
		return a.Env.Lookup(a.alias + "__" + rest)
	}
	return "", false
}

// checkEnv refuses the variables under prefix (and env's alias) that
// name no setting, each with the nearest setting's variable.
func checkEnv(fields []field, prefix string, env Env) error {
	prefixes := []string{prefix}
	if a, ok := env.(aliasEnv); ok && a.prefix == prefix {
		prefixes = append(prefixes, a.alias)
	}
	var unknown []string
	names := env.Names()
	slices.Sort(names)
	for _, name := range names {
		for _, p := range prefixes {
			rest, ok := strings.CutPrefix(name, p+"__")
			if !ok || rest == "CONFIG" || isSetting(fields, p, name) {
				continue
			}
			show := func(n string) string { return EnvName(p, n) }
			unknown = append(unknown, name+suggest(strings.ToLower(strings.ReplaceAll(rest, "_", "-")), fields, show))
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("settings: unknown variable %s: no such setting", strings.Join(unknown, ", "))
	}
	return nil
}

func isSetting(fields []field, prefix, name string) bool {
	return slices.ContainsFunc(fields, func(f field) bool { return EnvName(prefix, f.name) == name })
}

// nearest is the setting whose name is closest to name, when it is
// close enough to be the one meant: at most a third of its letters off
// (a swapped pair counts one), or one.
func nearest(name string, fields []field) (string, bool) {
	best, bestD := "", -1
	for _, f := range fields {
		if d := distance(name, f.name); bestD < 0 || d < bestD {
			best, bestD = f.name, d
		}
	}
	return best, bestD >= 0 && bestD <= max(1, len(name)/3)
}

// distance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of adjacent letters.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// suggest is " (did you mean X?)" for the setting nearest name, shown as
// show renders it, or "".
func suggest(name string, fields []field, show func(string) string) string {
	if near, ok := nearest(name, fields); ok {
		return " (did you mean " + show(near) + "?)"
	}
	return ""
}
