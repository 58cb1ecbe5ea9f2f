package settings

import (
	"fmt"
	"reflect"
	"slices"
)

// Part is one config struct of a Group.
type Part struct {
	// Name names the part in Setting.Parts ("autoconnect").
	Name string
	// Cfg points at the struct, which holds its defaults.
	Cfg any
	// Prefix renames this part's settings that another part has too and
	// that are not shared: with "connect-", listen becomes connect-listen.
	Prefix string
}

// Group is several config structs loaded as one set of settings under one
// prefix, as a process that runs several of them loads them (both tiers
// in one process). Load and Describe take it in place of a struct.
//
// A setting only one part has keeps its name. A name several parts have
// is one setting when it is shared: it sets the field of every part that
// has it, and its default is the first such part's, copied to the others
// by NewGroup. A name several parts have that is not shared is one
// setting per part, its name prefixed with the part's Prefix. So a setting
// added to one part later is covered with no change here, and one whose
// name another part already has is renamed, never lost.
type Group struct {
	fields []field
}

// NewGroup joins the parts (pointers to structs, kept: loading sets their
// fields). It fails when a shared name has fields of different types, or
// when a prefixed name clashes with another setting.
func NewGroup(shared []string, parts ...Part) (*Group, error) {
	type occurrence struct {
		part int
		f    field
	}
	var order []string
	seen := map[string][]occurrence{}
	for i, p := range parts {
		v := reflect.ValueOf(p.Cfg)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			return nil, fmt.Errorf("settings: group part %s is not a pointer to a struct", p.Name)
		}
		for _, f := range fieldsOf(v.Elem()) {
			if seen[f.name] == nil {
				order = append(order, f.name)
			}
			seen[f.name] = append(seen[f.name], occurrence{i, f})
		}
	}
	g := &Group{}
	names := map[string]bool{}
	add := func(f field) error {
		if names[f.name] {
			return fmt.Errorf("settings: group: two settings named %q", f.name)
		}
		names[f.name] = true
		g.fields = append(g.fields, f)
		return nil
	}
	for _, name := range order {
		occ := seen[name]
		switch {
		case len(occ) == 1:
			f := occ[0].f
			f.parts = []string{parts[occ[0].part].Name}
			if err := add(f); err != nil {
				return nil, err
			}
		case slices.Contains(shared, name):
			f := occ[0].f
			f.parts = []string{parts[occ[0].part].Name}
			for _, o := range occ[1:] {
				if o.f.v.Type() != f.v.Type() {
					return nil, fmt.Errorf("settings: group: shared setting %q has types %s and %s", name, f.v.Type(), o.f.v.Type())
				}
				o.f.v.Set(f.v)
				f.also = append(f.also, o.f.v)
				f.parts = append(f.parts, parts[o.part].Name)
			}
			if err := add(f); err != nil {
				return nil, err
			}
		default:
			for _, o := range occ {
				f := o.f
				f.name = parts[o.part].Prefix + name
				f.parts = []string{parts[o.part].Name}
				if err := add(f); err != nil {
					return nil, err
				}
			}
		}
	}
	return g, nil
}
