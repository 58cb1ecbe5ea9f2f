// Package settings loads a tier's configuration struct from, in rising
// precedence: the struct's defaults, an optional JSON file, environment
// variables PREFIX__NAME, and command-line flags -name. Both tiers use it,
// so they configure the same way (AUTOCONNECT__PORT=8080, -port 8080).
//
// Fields are exported struct fields (also those of embedded structs) with
// a `conf:"name"` tag and a `help:"..."` tag; supported kinds are string, bool, int, int64, float64,
// time.Duration and []string (comma-separated).
package settings

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Load fills cfg (a pointer to a struct holding defaults) from the file
// named by -config or PREFIX__CONFIG, then the environment, then args.
// It returns flag.ErrHelp after printing usage for -h/-help.
func Load(cfg any, prefix string, args []string, env func(string) (string, bool), usage io.Writer) error {
	v := reflect.ValueOf(cfg)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return errors.New("settings: Load needs a pointer to a struct")
	}
	fields := fieldsOf(v.Elem())
	fs := flag.NewFlagSet(strings.ToLower(prefix), flag.ContinueOnError)
	fs.SetOutput(usage)
	file := fs.String("config", "", "optional JSON file with settings (env "+prefix+"__CONFIG)")
	flagValues := map[string]*string{}
	for _, f := range fields {
		flagValues[f.name] = fs.String(f.name, "", fmt.Sprintf("%s (env %s, default %q)", f.help, envName(prefix, f.name), f.String()))
	}
	fs.Usage = func() {
		fmt.Fprintf(usage, "Usage of %s:\n", strings.ToLower(prefix))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		*file, _ = env(envName(prefix, "config"))
	}
	if *file != "" {
		if err := loadFile(*file, fields); err != nil {
			return err
		}
	}
	for _, f := range fields {
		if s, ok := env(envName(prefix, f.name)); ok {
			if err := f.set(s); err != nil {
				return fmt.Errorf("settings: env %s: %w", envName(prefix, f.name), err)
			}
		}
	}
	var err error
	fs.Visit(func(fl *flag.Flag) {
		if f, ok := findField(fields, fl.Name); ok && err == nil {
			if e := f.set(*flagValues[fl.Name]); e != nil {
				err = fmt.Errorf("settings: flag -%s: %w", fl.Name, e)
			}
		}
	})
	return err
}

// Describe lists every setting with its env name, default and help, in
// field order: the configuration reference is generated from it.
func Describe(cfg any, prefix string) []Setting {
	var out []Setting
	for _, f := range fieldsOf(reflect.ValueOf(cfg).Elem()) {
		out = append(out, Setting{Name: f.name, Env: envName(prefix, f.name), Default: f.String(), Help: f.help})
	}
	return out
}

// Setting describes one configuration field.
type Setting struct {
	Name, Env, Default, Help string
}

func envName(prefix, name string) string {
	return prefix + "__" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

type field struct {
	name, help string
	v          reflect.Value
}

// fieldsOf lists the tagged fields of s in order, including those of
// embedded structs (settings shared by several configs).
func fieldsOf(s reflect.Value) []field {
	var out []field
	t := s.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if name, ok := f.Tag.Lookup("conf"); ok {
			out = append(out, field{name: name, help: f.Tag.Get("help"), v: s.Field(i)})
		} else if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, fieldsOf(s.Field(i))...)
		}
	}
	return out
}

func findField(fields []field, name string) (field, bool) {
	for _, f := range fields {
		if f.name == name {
			return f, true
		}
	}
	return field{}, false
}

var durationType = reflect.TypeOf(time.Duration(0))

func (f field) set(s string) error {
	switch {
	case f.v.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		f.v.SetInt(int64(d))
	case f.v.Kind() == reflect.String:
		f.v.SetString(s)
	case f.v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		f.v.SetBool(b)
	case f.v.Kind() == reflect.Int || f.v.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		f.v.SetInt(n)
	case f.v.Kind() == reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		f.v.SetFloat(x)
	case f.v.Kind() == reflect.Slice && f.v.Type().Elem().Kind() == reflect.String:
		var parts []string
		for p := range strings.SplitSeq(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		f.v.Set(reflect.ValueOf(parts))
	default:
		return fmt.Errorf("unsupported kind %s", f.v.Kind())
	}
	return nil
}

func (f field) String() string {
	switch {
	case f.v.Type() == durationType:
		return time.Duration(f.v.Int()).String()
	case f.v.Kind() == reflect.Slice:
		return strings.Join(f.v.Interface().([]string), ",")
	default:
		return fmt.Sprint(f.v.Interface())
	}
}

// loadFile reads a JSON object whose keys are setting names and whose
// values are JSON strings, numbers or booleans (durations as "10s").
func loadFile(path string, fields []field) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("settings: %s: %w", path, err)
	}
	for k, raw := range m {
		f, ok := findField(fields, k)
		if !ok {
			return fmt.Errorf("settings: %s: unknown setting %q", path, k)
		}
		var s string
		switch x := raw.(type) {
		case string:
			s = x
		case bool:
			s = strconv.FormatBool(x)
		case float64:
			s = strconv.FormatFloat(x, 'f', -1, 64)
		case []any:
			parts := make([]string, len(x))
			for i := range x {
				parts[i] = fmt.Sprint(x[i])
			}
			s = strings.Join(parts, ",")
		default:
			return fmt.Errorf("settings: %s: %q has an unsupported value", path, k)
		}
		if err := f.set(s); err != nil {
			return fmt.Errorf("settings: %s: %q: %w", path, k, err)
		}
	}
	return nil
}
