package component

import (
	"encoding/json"
	"github.com/getorrery/orrery/internal/prose"
	"math"
	"strconv"
	"strings"
)

// toText converts a bound value to text inside a template: a string as it
// is, a number as numberText writes it, true and false as words, null as
// nothing, and an array or object as compact JSON with sorted keys.
func toText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case json.Number:
		return numberText(x)
	}
	b, err := marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// numberText writes a JSON number: an integer in full, as written; any
// other number as the shortest decimal that reads back as the same float64,
// with an exponent only below 0.0001 or from 1e15. A number out of
// float64's range is written as it was sent.
func numberText(n json.Number) string {
	s := string(n)
	if isInteger(s) {
		if s == "-0" {
			return "0"
		}
		return s
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	if f == 0 {
		return "0"
	}
	if a := math.Abs(f); a >= 1e-4 && a < 1e15 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// isInteger reports whether s is -?(0|[1-9][0-9]*).
func isInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" || len(s) > 1 && s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// apply formats a value. A value that is not a number keeps its plain text
// under number, percent, duration and count.
func (f format) apply(v any) string {
	if f.name == "json" {
		b, err := marshal(v)
		if err != nil {
			return ""
		}
		return string(b)
	}
	n, ok := v.(json.Number)
	if !ok {
		return toText(v)
	}
	switch f.name {
	case "number":
		neg, ip, fp, ok := decimal(n)
		if !ok {
			return toText(v)
		}
		if f.places >= 0 {
			ip, fp = roundHalfUp(ip, fp, f.places)
		}
		return signed(neg, prose.GroupDigits(ip), fp)
	case "percent":
		neg, ip, fp, ok := decimal(n)
		if !ok {
			return toText(v)
		}
		ip, fp = shift2(ip, fp)
		places := max(f.places, 0)
		if len(fp) > places {
			fp = fp[:places] // toward zero: 99.99% never reads 100%
		} else {
			fp += strings.Repeat("0", places-len(fp))
		}
		return signed(neg, prose.GroupDigits(ip), fp) + "%"
	case "duration":
		return duration(number(n))
	case "count":
		noun := f.plural
		if number(n) == 1 {
			noun = f.singular
		}
		text := numberText(n)
		if neg, ip, fp, ok := decimal(n); ok {
			text = signed(neg, prose.GroupDigits(ip), fp)
		}
		return text + " " + noun
	}
	return toText(v)
}

// decimal splits a number into sign, integer digits and fraction digits,
// exactly for an integer literal and otherwise from the shortest decimal of
// its float64. ok is false for a number out of float64's range.
func decimal(n json.Number) (neg bool, ip, fp string, ok bool) {
	s := string(n)
	if isInteger(s) {
		neg = strings.HasPrefix(s, "-") && s != "-0"
		return neg, strings.TrimPrefix(s, "-"), "", true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return false, "", "", false
	}
	neg = f < 0
	ip, fp, _ = strings.Cut(strconv.FormatFloat(math.Abs(f), 'f', -1, 64), ".")
	return neg, ip, fp, true
}

// roundHalfUp rounds ip.fp to places decimals, a 5 rounding away from zero.
func roundHalfUp(ip, fp string, places int) (string, string) {
	if len(fp) <= places {
		return ip, fp + strings.Repeat("0", places-len(fp))
	}
	up := fp[places] >= '5'
	digits := []byte(ip + fp[:places])
	if up {
		i := len(digits) - 1
		for ; i >= 0; i-- {
			if digits[i] < '9' {
				digits[i]++
				break
			}
			digits[i] = '0'
		}
		if i < 0 {
			digits = append([]byte{'1'}, digits...)
		}
	}
	cut := len(digits) - places
	return string(digits[:cut]), string(digits[cut:])
}

// shift2 multiplies ip.fp by 100 by moving the point.
func shift2(ip, fp string) (string, string) {
	fp += "00"
	ip = strings.TrimLeft(ip+fp[:2], "0")
	if ip == "" {
		ip = "0"
	}
	return ip, strings.TrimRight(fp[2:], "0")
}

// signed joins sign, integer and fraction, writing no minus for zero.
func signed(neg bool, ip, fp string) string {
	s := ip
	if fp != "" {
		s += "." + fp
	}
	if neg && strings.Trim(s, "0.,") != "" {
		s = "-" + s
	}
	return s
}

// duration writes seconds as the largest unit and the next (days d, hours h,
// minutes m, seconds s): "1h 5m", "45s"; under a second as "350ms".
func duration(sec float64) string {
	if math.IsNaN(sec) || math.IsInf(sec, 0) || math.Abs(sec) >= 1e15 {
		return strconv.FormatFloat(sec, 'g', -1, 64) + "s"
	}
	sign := ""
	if sec < 0 {
		sign, sec = "-", -sec
	}
	if ms := math.Round(sec * 1000); ms < 1000 {
		if ms == 0 {
			return "0s"
		}
		return sign + strconv.Itoa(int(ms)) + "ms"
	}
	total := int64(math.Round(sec))
	units := []struct {
		size int64
		name string
	}{{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}}
	for i, u := range units {
		if total < u.size {
			continue
		}
		s := sign + strconv.FormatInt(total/u.size, 10) + u.name
		if i+1 < len(units) {
			next := units[i+1]
			if r := total % u.size / next.size; r > 0 {
				s += " " + strconv.FormatInt(r, 10) + next.name
			}
		}
		return s
	}
	return "0s"
}
