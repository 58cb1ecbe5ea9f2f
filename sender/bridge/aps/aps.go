// Package aps is the "aps" dictionary of an APNs notification to
// Firefox for iOS: what a registration may store as its "aps" (Check,
// which the registration API applies), and the "aps" block a push then
// carries (Derive, as autopush-rs derives it), its alert localised by
// the app's notification extension.
//
// It is pure: no I/O, and no import of the APNs client (sender/apns),
// so that the API tier and the bridges can check and carry an "aps"
// without linking the client.
package aps

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrInvalid is a registration's "aps" that no alert can be derived
// from (a field the derivation reads has the wrong type): the
// registration API refuses it, and a push to a registration stored
// with one before is failed unsent, as autopush-rs refuses it.
var ErrInvalid = errors.New("apns: invalid aps")

// DataKey is the notification data key that carries the registration's
// "aps" (JSON text) to the provider; apns.Payload derives the "aps"
// block from it (Derive) and never sends it as a field of its own.
const DataKey = "aps"

// Block is the "aps" block: a mutable-content alert whose localisation
// keys Firefox for iOS's notification extension replaces with the
// decrypted message (or its "no tab arriving" fallback).
type Block struct {
	Alert          alert `json:"alert"`
	MutableContent int   `json:"mutable-content"`
}

// alert is the alert dictionary in Apple's spelling, its keys sorted. A
// nil field is not sent; a field the registration set is sent as set,
// even empty.
type alert struct {
	ActionLocKey *string   `json:"action-loc-key,omitempty"`
	Body         *string   `json:"body,omitempty"`
	LaunchImage  *string   `json:"launch-image,omitempty"`
	LocArgs      *[]string `json:"loc-args,omitempty"`
	LocKey       *string   `json:"loc-key,omitempty"`
	Subtitle     *string   `json:"subtitle,omitempty"`
	Title        *string   `json:"title,omitempty"`
	TitleLocArgs *[]string `json:"title-loc-args,omitempty"`
	TitleLocKey  *string   `json:"title-loc-key,omitempty"`
}

// defaultAPS is the block sent when the registration has no "aps".
func defaultBlock() Block {
	loc, title := "SentTab.NoTabArrivingNotification.body", "SentTab.NoTabArrivingNotification.title"
	return Block{Alert: alert{LocKey: &loc, TitleLocKey: &title}, MutableContent: 1}
}

// Derive is the "aps" block sent for a registration's "aps" (JSON
// text; "" for none), as autopush-rs derives it: the default block,
// with the alert's fields replaced by the registration's title,
// subtitle, body, title_loc_key, title_loc_args, action_loc_key,
// loc_key, loc_args and launch_image (strings, or arrays of strings for
// the _args); mutable-content stays 1 (the registration's may only be an
// integer). Every other key is ignored. A key present with another type
// is ErrInvalid naming it.
func Derive(text string) (Block, error) {
	a := defaultBlock()
	if text == "" {
		return a, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &m); err != nil || m == nil {
		return a, fmt.Errorf("%w: not a JSON object", ErrInvalid)
	}
	for key, dst := range map[string]**string{
		"title": &a.Alert.Title, "subtitle": &a.Alert.Subtitle, "body": &a.Alert.Body,
		"title_loc_key": &a.Alert.TitleLocKey, "action_loc_key": &a.Alert.ActionLocKey,
		"loc_key": &a.Alert.LocKey, "launch_image": &a.Alert.LaunchImage,
	} {
		if raw, ok := m[key]; ok {
			s, err := jsonString(raw)
			if err != nil {
				return defaultBlock(), fmt.Errorf("%w: %q must be a string", ErrInvalid, key)
			}
			*dst = &s
		}
	}
	for key, dst := range map[string]**[]string{"title_loc_args": &a.Alert.TitleLocArgs, "loc_args": &a.Alert.LocArgs} {
		if raw, ok := m[key]; ok {
			args, err := jsonStrings(raw)
			if err != nil {
				return defaultBlock(), fmt.Errorf("%w: %q must be an array of strings", ErrInvalid, key)
			}
			*dst = &args
		}
	}
	if raw, ok := m["mutable-content"]; ok {
		if _, err := jsonInt(raw, -1<<63, 1<<63-1); err != nil {
			return defaultBlock(), fmt.Errorf("%w: %q must be an integer", ErrInvalid, "mutable-content")
		}
	}
	return a, nil
}

// Check reports (ErrInvalid) a registration's "aps" (JSON text)
// that autopush-rs would refuse: one the alert cannot be derived from,
// or whose badge, sound, content-available, category, mutable-content
// or url-args has the wrong type (null is allowed for these, as it is
// there).
func Check(text string) error {
	if _, err := Derive(text); err != nil {
		return err
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal([]byte(text), &m) // Derive parsed it
	for key, check := range map[string]func(json.RawMessage) error{
		"badge":             func(r json.RawMessage) error { _, err := jsonInt(r, 0, 1<<32-1); return err },
		"content-available": func(r json.RawMessage) error { _, err := jsonInt(r, 0, 255); return err },
		"mutable-content":   func(r json.RawMessage) error { _, err := jsonInt(r, 0, 255); return err },
		"sound":             func(r json.RawMessage) error { _, err := jsonString(r); return err },
		"category":          func(r json.RawMessage) error { _, err := jsonString(r); return err },
		"url-args":          func(r json.RawMessage) error { _, err := jsonStrings(r); return err },
	} {
		raw, ok := m[key]
		if !ok || string(bytes.TrimSpace(raw)) == "null" {
			continue
		}
		if err := check(raw); err != nil {
			return fmt.Errorf("%w: %q has the wrong type", ErrInvalid, key)
		}
	}
	return nil
}

var errType = errors.New("wrong JSON type")

// jsonString reads a JSON string (not null, as a plain Unmarshal would
// let through).
func jsonString(raw json.RawMessage) (string, error) {
	var s string
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", errType
	}
	return s, nil
}

// jsonStrings reads a JSON array of strings.
func jsonStrings(raw json.RawMessage) ([]string, error) {
	var items []json.RawMessage
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, errType
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, err := jsonString(it)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// jsonInt reads a JSON integer (no fraction or exponent) within [lo, hi].
func jsonInt(raw json.RawMessage, lo, hi int64) (int64, error) {
	var n json.Number
	// A JSON string decodes into a Number too: only a number literal
	// counts.
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') || json.Unmarshal(raw, &n) != nil {
		return 0, errType
	}
	v, err := n.Int64()
	if err != nil || v < lo || v > hi {
		return 0, errType
	}
	return v, nil
}
