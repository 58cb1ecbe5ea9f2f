package settings

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
)

// enum is the values a setting takes, from its `enum:"a|b|c"` tag; an
// empty alternative ("|a|b") allows the empty value. nil: any value.
func (f field) enum() []string {
	tag, ok := f.tag.Lookup("enum")
	if !ok {
		return nil
	}
	return strings.Split(tag, "|")
}

// oneOf is s as the enum spells it, matched regardless of case (the log
// level and the consistency levels were read so before they were checked).
func (f field) oneOf(s string) (string, error) {
	values := f.enum()
	if values == nil {
		return s, nil
	}
	for _, v := range values {
		if strings.EqualFold(v, s) {
			return v, nil
		}
	}
	return "", fmt.Errorf("%q is not %s", s, enumText(values))
}

// enumText is "one of a|b|c" (", or empty" when "" is one).
func enumText(values []string) string {
	text := "one of " + strings.Join(slices.DeleteFunc(slices.Clone(values), func(v string) bool { return v == "" }), "|")
	if slices.Contains(values, "") {
		text += ", or empty"
	}
	return text
}

// typeName is the setting's type as -help and the reference show it:
// bool, int, float, duration, string, list, number list, or one of a|b|c.
func (f field) typeName() string {
	if values := f.enum(); values != nil {
		return enumText(values)
	}
	switch {
	case f.v.Type() == durationType:
		return "duration"
	case f.v.Type() == floatsType:
		return "number list"
	case f.v.Kind() == reflect.Slice:
		return "list"
	case f.v.Kind() == reflect.Int || f.v.Kind() == reflect.Int64:
		return "int"
	case f.v.Kind() == reflect.Float64:
		return "float"
	}
	return f.v.Kind().String() // bool, string
}

// printUsage writes -help: the command's own flags, then every setting in
// field order with its type, variable and default.
func printUsage(w io.Writer, fs *flag.FlagSet, fields []field, prefix string) {
	fmt.Fprintf(w, "Usage of %s:\n", fs.Name())
	for _, name := range []string{"config", CheckConfigFlag} {
		fl := fs.Lookup(name)
		typ := " string"
		if name == CheckConfigFlag {
			typ = ""
		}
		fmt.Fprintf(w, "  -%s%s\n    \t%s\n", name, typ, fl.Usage)
	}
	for _, f := range fields {
		def := f.String()
		if f.v.Kind() == reflect.String {
			def = fmt.Sprintf("%q", def)
		}
		bare := ""
		if f.v.Kind() == reflect.Bool {
			bare = fmt.Sprintf("; -%s alone means true", f.name)
		}
		fmt.Fprintf(w, "  -%s %s\n    \t%s (env %s, default %s%s)\n", f.name, f.typeName(), f.help, EnvName(prefix, f.name), def, bare)
	}
}
