package component

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// jsonType names the JSON type of a decoded value.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "an unknown value"
}

// display shows a decoded value in a refusal: scalars as JSON, strings
// shortened and quoted, containers by type.
func display(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(shorten(x))
	case json.Number:
		return shorten(string(x))
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return "null"
	}
	return article(jsonType(v))
}

// clause turns a description sentence into a clause that follows "; ".
func clause(d string) string {
	d = strings.TrimSuffix(strings.TrimSpace(d), ".")
	r, size := utf8.DecodeRuneInString(d)
	if size == 0 {
		return ""
	}
	next, _ := utf8.DecodeRuneInString(d[size:])
	if r >= 'A' && r <= 'Z' && !(next >= 'A' && next <= 'Z') {
		d = string(r+'a'-'A') + d[size:]
	}
	return d
}

// groupInt writes n with commas between thousands, as 262,144.
func groupInt(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + group(s[1:])
	}
	return group(s)
}
