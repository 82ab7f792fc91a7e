// Package prose writes JSON values and numbers into the sentences of
// refusals, the same way in every package that validates what clients
// send: types named with their article, values shortened and quoted,
// schema descriptions turned into clauses, thousands grouped.
package prose

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// JSONType names the JSON type of a decoded value: null, boolean, number,
// string, array or object.
func JSONType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64, int:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown value"
}

// Article puts "a" or "an" before a JSON type name ("null" stays bare).
func Article(t string) string {
	switch t {
	case "array", "object", "unknown value":
		return "an " + t
	case "null":
		return "null"
	}
	return "a " + t
}

// Display shows a decoded value in a refusal: scalars as JSON, strings
// shortened and quoted, containers by their type.
func Display(v any) string {
	switch x := v.(type) {
	case string:
		return Quote(x)
	case json.Number:
		return Shorten(string(x))
	case float64:
		return Shorten(strconv.FormatFloat(x, 'g', -1, 64))
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return "null"
	}
	return Article(JSONType(v))
}

// Quote quotes s for a refusal, shortened to 40 characters.
func Quote(s string) string { return strconv.Quote(Shorten(s)) }

// Shorten cuts s to 40 characters, ending a cut one with "…".
func Shorten(s string) string {
	const most = 40
	if utf8.RuneCountInString(s) <= most {
		return s
	}
	return string([]rune(s)[:most-1]) + "…"
}

// Clause turns a description sentence into a clause that follows "; ":
// no final period, and a lower-case first letter unless it starts an
// acronym.
func Clause(d string) string {
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

// Group writes n with commas between thousands, as 262,144.
func Group(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + GroupDigits(s[1:])
	}
	return GroupDigits(s)
}

// GroupDigits puts a comma between each three digits of an unsigned
// integer's digits: "1234567" becomes "1,234,567".
func GroupDigits(digits string) string {
	if len(digits) <= 3 {
		return digits
	}
	var b strings.Builder
	for i := 0; i < len(digits); i++ {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(digits[i])
	}
	return b.String()
}
