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

// Request is what a command line asks besides settings.
type Request struct {
	// CheckConfig is -check-config: validate the whole configuration,
	// print "configuration OK" and exit, without listening or opening
	// the store (deploy pipelines).
	CheckConfig bool
}

// CheckConfigFlag is the flag setting Request.CheckConfig.
const CheckConfigFlag = "check-config"

// ErrArgs is the error of a positional argument: settings are flags, so
// one is a mistake (`autopush version`, `-pprof true`) that must not be
// ignored. A binary with subcommands takes them from its arguments
// before Load.
var ErrArgs = errors.New("unexpected argument")

// Load fills cfg (a pointer to a struct holding defaults, or a *Group of
// several) from the file named by -config or PREFIX__CONFIG, then the
// environment, then args: only the flags given override.
// It refuses, naming the nearest setting, a PREFIX__ variable, a file key
// or a flag that is none; a value outside a setting's `enum`; and any
// positional argument (ErrArgs). It returns flag.ErrHelp after printing
// usage for -h/-help.
func Load(cfg any, prefix string, args []string, env Env, usage io.Writer) (Request, error) {
	var req Request
	fields, err := fieldsFor(cfg)
	if err != nil {
		return req, err
	}
	fs := flag.NewFlagSet(strings.ToLower(prefix), flag.ContinueOnError)
	// Errors are returned, not printed with the whole usage after them.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	file := fs.String("config", "", "optional JSON file with settings (env "+prefix+"__CONFIG)")
	fs.BoolVar(&req.CheckConfig, CheckConfigFlag, false, "validate the configuration and exit: 0 printing \"configuration OK\", or 1 with the error; listens on nothing, opens no store")
	given := map[string]*flagValue{}
	for _, f := range fields {
		given[f.name] = &flagValue{f: f}
		fs.Var(given[f.name], f.name, f.help)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(usage, fs, fields, prefix)
		}
		return req, unknownFlag(err, fields)
	}
	if fs.NArg() > 0 {
		return req, fmt.Errorf("settings: %w %q: settings are flags (-name value; a boolean is -name or -name=false), see -help", ErrArgs, fs.Arg(0))
	}
	if err := checkEnv(fields, prefix, env); err != nil {
		return req, err
	}
	if *file == "" {
		*file, _ = env.Lookup(EnvName(prefix, "config"))
	}
	if *file != "" {
		if err := loadFile(*file, fields); err != nil {
			return req, err
		}
	}
	for _, f := range fields {
		if s, ok := env.Lookup(EnvName(prefix, f.name)); ok {
			if err := f.set(s); err != nil {
				return req, fmt.Errorf("settings: env %s: %w", EnvName(prefix, f.name), err)
			}
		}
	}
	fs.Visit(func(fl *flag.Flag) {
		if v, ok := given[fl.Name]; ok && err == nil {
			if e := v.f.set(v.s); e != nil {
				err = fmt.Errorf("settings: flag -%s: %w", fl.Name, e)
			}
		}
	})
	return req, err
}

// flagValue is a setting's flag: the value as given, set after the file
// and the environment (flags win). A boolean setting's flag is a boolean
// flag: -receipts alone means true.
type flagValue struct {
	f field
	s string
}

func (v *flagValue) String() string     { return v.s }
func (v *flagValue) Set(s string) error { v.s = s; return nil }
func (v *flagValue) IsBoolFlag() bool {
	return v.f.v.IsValid() && v.f.v.Kind() == reflect.Bool
}

// unknownFlag adds the nearest setting to the flag package's error on a
// flag that is none.
func unknownFlag(err error, fields []field) error {
	const undefined = "flag provided but not defined: -"
	name, ok := strings.CutPrefix(err.Error(), undefined)
	if !ok {
		return err
	}
	return fmt.Errorf("settings: %w%s", err, suggest(name, fields, func(n string) string { return "-" + n }))
}

// Flags registers the settings of cfg (a pointer to a struct holding
// defaults) on fs, with the flag package's own types for string, bool, int,
// int64, float64 and time.Duration, so -help shows "-port int" and the
// default; lists take comma-separated values. keep, when not nil, selects
// the fields by their struct tag (for instance a tag of the caller's own
// saying which subcommand reads the field). Unlike Load there is no file
// and no environment.
func Flags(fs *flag.FlagSet, cfg any, keep func(reflect.StructTag) bool) {
	for _, f := range fieldsOf(reflect.ValueOf(cfg).Elem()) {
		if keep != nil && !keep(f.tag) {
			continue
		}
		switch p := f.v.Addr().Interface().(type) {
		case *string:
			fs.StringVar(p, f.name, *p, f.help)
		case *bool:
			fs.BoolVar(p, f.name, *p, f.help)
		case *int:
			fs.IntVar(p, f.name, *p, f.help)
		case *int64:
			fs.Int64Var(p, f.name, *p, f.help)
		case *float64:
			fs.Float64Var(p, f.name, *p, f.help)
		case *time.Duration:
			fs.DurationVar(p, f.name, *p, f.help)
		default:
			fs.Var(f, f.name, f.help)
		}
	}
}

// Describe lists every setting of cfg (a pointer to a struct, or a
// *Group) with its env name, default and help, in field order: the
// configuration reference is generated from it. Default is the value in
// cfg, as a flag or variable would give it. It panics when cfg is neither.
func Describe(cfg any, prefix string) []Setting {
	fields, err := fieldsFor(cfg)
	if err != nil {
		panic(err)
	}
	var out []Setting
	for _, f := range fields {
		out = append(out, Setting{Name: f.name, Env: EnvName(prefix, f.name), Default: f.String(), Help: f.help, Type: f.typeName(),
			Enum: f.enum(), Tag: f.tag, Parts: f.parts})
	}
	return out
}

// Setting describes one configuration field.
type Setting struct {
	Name, Env, Default, Help string
	// Type is the value's type as -help shows it: bool, int, float,
	// duration, string, list, number list, or one of a|b|c.
	Type string
	// Enum is the values the setting takes (its `enum` tag), nil for
	// any; "" among them allows the empty value.
	Enum []string
	// Tag is the field's struct tag, for callers' own tags.
	Tag reflect.StructTag
	// Parts names the parts of a Group whose field the setting sets (one,
	// or several for a shared setting); nil outside a Group.
	Parts []string
}

// fieldsFor lists the settings of a struct pointer or a *Group.
func fieldsFor(cfg any) ([]field, error) {
	if g, ok := cfg.(*Group); ok {
		return g.fields, nil
	}
	v := reflect.ValueOf(cfg)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, errors.New("settings: need a pointer to a struct or a *Group")
	}
	return fieldsOf(v.Elem()), nil
}

// EnvName is the variable of setting name under prefix: AUTOPUSH,
// max-unacked: AUTOPUSH__MAX_UNACKED.
func EnvName(prefix, name string) string {
	return prefix + "__" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// field is one setting. It is also the flag.Value of the kinds the flag
// package has no type for (lists).
type field struct {
	name, help string
	tag        reflect.StructTag
	v          reflect.Value
	// also are the fields of the other parts a shared Group setting
	// sets too; parts names the parts (Group only).
	also  []reflect.Value
	parts []string
}

// fieldsOf lists the tagged fields of s in order, including those of
// embedded structs (settings shared by several configs).
func fieldsOf(s reflect.Value) []field {
	var out []field
	t := s.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if name, ok := f.Tag.Lookup("conf"); ok {
			out = append(out, field{name: name, help: f.Tag.Get("help"), tag: f.Tag, v: s.Field(i)})
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

var (
	durationType = reflect.TypeFor[time.Duration]()
	floatsType   = reflect.TypeFor[[]float64]()
)

// Set parses s into the field (flag.Value).
func (f field) Set(s string) error { return f.set(s) }

// set parses s into the field, and copies the result to the fields of
// the other parts that share it.
func (f field) set(s string) error {
	if err := f.parse(s); err != nil {
		return err
	}
	for _, a := range f.also {
		a.Set(f.v)
	}
	return nil
}

func (f field) parse(s string) error {
	switch {
	case f.v.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		f.v.SetInt(int64(d))
	case f.v.Kind() == reflect.String:
		v, err := f.oneOf(s)
		if err != nil {
			return err
		}
		f.v.SetString(v)
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
	case f.v.Kind() == reflect.Slice && f.v.Type().Elem().Kind() == reflect.String:
		f.v.Set(reflect.ValueOf(splitList(s)))
	default:
		return fmt.Errorf("unsupported kind %s", f.v.Kind())
	}
	return nil
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var parts []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	return parts
}

// String is the field's value as a flag or variable would give it; "" for
// the zero field (flag.Value).
func (f field) String() string {
	switch {
	case !f.v.IsValid():
		return ""
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
			return fmt.Errorf("settings: %s: unknown setting %q%s", path, k, suggest(k, fields, strconv.Quote))
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
