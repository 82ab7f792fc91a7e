package ui

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/getorrery/orrery/internal/prose"
	"slices"
	"strings"
)

// surfaceNode is a surface that passed its schema, decoded. path is its
// JSON Pointer inside the surface that was checked ("" for the whole).
type surfaceNode struct {
	path string
	t    string
	kind any // one of the *…Kind types below
}

type textKind struct {
	Value string `json:"value"`
}

type markdownKind struct {
	Value string `json:"value"`
}

type tableKind struct {
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
	Align   []string   `json:"align"`
}

type treeNode struct {
	Label    string     `json:"label"`
	Children []treeNode `json:"children"`
}

type treeKind struct {
	Nodes []treeNode `json:"nodes"`
}

type diffKind struct {
	Value string `json:"value"`
	Path  string `json:"path"`
}

type progressKind struct {
	Value *float64 `json:"value"`
	Max   *float64 `json:"max"`
	Label string   `json:"label"`
}

func (p *progressKind) max() float64 {
	if p.Max == nil {
		return 100
	}
	return *p.Max
}

type streamKind struct {
	Value  string   `json:"value"`
	Chunks []string `json:"chunks"`
}

type taskStep struct {
	Title  string `json:"title"`
	Status string `json:"status"`
}

type taskKind struct {
	Title  string     `json:"title"`
	Status string     `json:"status"`
	Detail string     `json:"detail"`
	Steps  []taskStep `json:"steps"`
}

type questionChoice struct {
	Label  string  `json:"label"`
	Value  *string `json:"value"`
	Detail string  `json:"detail"`
}

func (c questionChoice) value() string {
	if c.Value == nil {
		return c.Label
	}
	return *c.Value
}

type questionAnswer struct {
	Choices []string `json:"choices"`
	Text    *string  `json:"text"`
}

type questionKind struct {
	Prompt    string           `json:"prompt"`
	Detail    string           `json:"detail"`
	Choices   []questionChoice `json:"choices"`
	Multiple  bool             `json:"multiple"`
	AllowText bool             `json:"allowText"`
	Answer    *questionAnswer  `json:"answer"`
}

type formField struct {
	Name        string          `json:"name"`
	Label       string          `json:"label"`
	Type        string          `json:"type"`
	Value       json.RawMessage `json:"value"`
	Choices     []string        `json:"choices"`
	Min         *float64        `json:"min"`
	Max         *float64        `json:"max"`
	Required    bool            `json:"required"`
	Placeholder string          `json:"placeholder"`
	Help        string          `json:"help"`
}

type formKind struct {
	Fields []formField `json:"fields"`
	Submit *string     `json:"submit"`
}

type stackKind struct {
	Children  []json.RawMessage `json:"children"`
	Direction string            `json:"direction"`

	nodes []*surfaceNode
}

type chartSeries struct {
	Label  string            `json:"label"`
	Values []json.RawMessage `json:"values"`

	nums  []float64    // every kind but scatter
	pairs [][2]float64 // scatter
}

type chartKind struct {
	Kind   string        `json:"kind"`
	Labels []string      `json:"labels"`
	Series []chartSeries `json:"series"`
	Unit   string        `json:"unit"`
}

type rasterKind struct {
	Rows    []string          `json:"rows"`
	Palette map[string]string `json:"palette"`
	Legend  map[string]string `json:"legend"`
	Alt     string            `json:"alt"`
}

type imageKind struct {
	Mime string `json:"mime"`
	Data string `json:"data"`
	Alt  string `json:"alt"`
}

// decodeSurface decodes a surface that passed its schema. On failure it
// returns the path of the value it could not read.
func decodeSurface(raw json.RawMessage, path string) (*surfaceNode, string, error) {
	var s struct {
		Kind json.RawMessage `json:"kind"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, path, err
	}
	kpath := at(path, "kind")
	var head struct {
		T string `json:"t"`
	}
	if err := json.Unmarshal(s.Kind, &head); err != nil {
		return nil, kpath, err
	}
	n := &surfaceNode{path: path, t: head.T}
	var k any
	switch head.T {
	case KindText:
		k = new(textKind)
	case KindMarkdown:
		k = new(markdownKind)
	case KindTable:
		k = new(tableKind)
	case KindTree:
		k = new(treeKind)
	case KindDiff:
		k = new(diffKind)
	case KindProgress:
		k = new(progressKind)
	case KindStream:
		k = new(streamKind)
	case KindTask:
		k = new(taskKind)
	case KindQuestion:
		k = new(questionKind)
	case KindForm:
		k = new(formKind)
	case KindStack:
		k = new(stackKind)
	case KindChart:
		k = new(chartKind)
	case KindRaster:
		k = new(rasterKind)
	case KindImage:
		k = new(imageKind)
	default:
		return nil, at(kpath, "t"), fmt.Errorf("unknown kind %q", head.T)
	}
	if err := json.Unmarshal(s.Kind, k); err != nil {
		return nil, kpath, err
	}
	n.kind = k
	switch k := k.(type) {
	case *stackKind:
		for i, c := range k.Children {
			cn, p, err := decodeSurface(c, at(kpath, "children", i))
			if err != nil {
				return nil, p, err
			}
			k.nodes = append(k.nodes, cn)
		}
	case *chartKind:
		for i := range k.Series {
			s := &k.Series[i]
			for j, v := range s.Values {
				var err error
				if k.Kind == ChartScatter {
					var p [2]float64
					err = json.Unmarshal(v, &p)
					s.pairs = append(s.pairs, p)
				} else {
					var f float64
					err = json.Unmarshal(v, &f)
					s.nums = append(s.nums, f)
				}
				if err != nil {
					return nil, at(kpath, "series", i, "values", j), err
				}
			}
		}
	}
	return n, "", nil
}

// check checks what a schema cannot state, and returns the path and reason
// of the first failure, or "" and "".
func (n *surfaceNode) check() (string, string) {
	kp := at(n.path, "kind")
	switch k := n.kind.(type) {
	case *tableKind:
		return k.check(kp)
	case *progressKind:
		if k.Value != nil && *k.Value > k.max() {
			return at(kp, "value"), fmt.Sprintf("%s is more than max %s; send a value from 0 to max, or raise max",
				formatNumber(*k.Value), formatNumber(k.max()))
		}
	case *questionKind:
		return k.check(kp)
	case *formKind:
		return k.check(kp)
	case *stackKind:
		for _, c := range k.nodes {
			if p, r := c.check(); r != "" {
				return p, r
			}
		}
	case *chartKind:
		return k.check(kp)
	case *rasterKind:
		return k.check(kp)
	case *imageKind:
		return k.check(kp)
	}
	return "", ""
}

func (k *tableKind) check(kp string) (string, string) {
	for i, row := range k.Rows {
		if len(row) != len(k.Columns) {
			return at(kp, "rows", i), fmt.Sprintf("this row has %d %s and the table has %d %s; give every row one cell per column",
				len(row), plural(len(row), "cell"), len(k.Columns), plural(len(k.Columns), "column"))
		}
	}
	if k.Align != nil && len(k.Align) != len(k.Columns) {
		return at(kp, "align"), fmt.Sprintf("align has %d %s and the table has %d %s; give one alignment per column",
			len(k.Align), plural(len(k.Align), "entry"), len(k.Columns), plural(len(k.Columns), "column"))
	}
	return "", ""
}

func (k *questionKind) check(kp string) (string, string) {
	if len(k.Choices) == 0 && !k.AllowText {
		return kp, `a question needs choices or "allowText": true; add one or the other`
	}
	seen := map[string]int{}
	for i, c := range k.Choices {
		if j, dup := seen[c.value()]; dup {
			return at(kp, "choices", i), fmt.Sprintf("its value %s is also choice %d's; give every choice its own value", prose.Quote(c.value()), j)
		}
		seen[c.value()] = i
	}
	if a := k.Answer; a != nil {
		for i, v := range a.Choices {
			if _, ok := seen[v]; !ok {
				return at(kp, "answer", "choices", i), fmt.Sprintf("%s is not the value of any choice; answer with the values of the question's choices", prose.Quote(v))
			}
		}
		if len(a.Choices) > 1 && !k.Multiple {
			return at(kp, "answer", "choices"), fmt.Sprintf(`%d choices picked, and a question without "multiple": true takes one; keep one or set multiple`, len(a.Choices))
		}
		if a.Text != nil && !k.AllowText {
			return at(kp, "answer", "text"), `a typed answer needs "allowText": true; remove the text or allow it`
		}
	}
	return "", ""
}

func (k *formKind) check(kp string) (string, string) {
	seen := map[string]int{}
	for i, f := range k.Fields {
		fp := at(kp, "fields", i)
		if j, dup := seen[f.Name]; dup {
			return at(fp, "name"), fmt.Sprintf("the name %s is also field %d's; give every field its own name", prose.Quote(f.Name), j)
		}
		seen[f.Name] = i
		for j, c := range f.Choices {
			if slices.Index(f.Choices, c) != j {
				return at(fp, "choices", j), fmt.Sprintf("%s is listed twice; list each choice once", prose.Quote(c))
			}
		}
		if f.Min != nil && f.Max != nil && *f.Min > *f.Max {
			return at(fp, "min"), fmt.Sprintf("min %s is more than max %s; swap them", formatNumber(*f.Min), formatNumber(*f.Max))
		}
		if len(f.Value) == 0 {
			continue
		}
		switch f.Type {
		case "choice":
			var v string
			_ = json.Unmarshal(f.Value, &v)
			if !slices.Contains(f.Choices, v) {
				return at(fp, "value"), fmt.Sprintf("%s is not one of the field's choices; use one of them", prose.Quote(v))
			}
		case "multichoice":
			var vs []string
			_ = json.Unmarshal(f.Value, &vs)
			for j, v := range vs {
				if !slices.Contains(f.Choices, v) {
					return at(fp, "value", j), fmt.Sprintf("%s is not one of the field's choices; use only those", prose.Quote(v))
				}
			}
		case "number":
			var v float64
			_ = json.Unmarshal(f.Value, &v)
			if f.Min != nil && v < *f.Min {
				return at(fp, "value"), fmt.Sprintf("%s is less than min %s; send a value from min to max", formatNumber(v), formatNumber(*f.Min))
			}
			if f.Max != nil && v > *f.Max {
				return at(fp, "value"), fmt.Sprintf("%s is more than max %s; send a value from min to max", formatNumber(v), formatNumber(*f.Max))
			}
		}
	}
	return "", ""
}

func (k *chartKind) check(kp string) (string, string) {
	if len(k.Series) > 1 {
		for i, s := range k.Series {
			if strings.TrimSpace(s.Label) == "" {
				return at(kp, "series", i, "label"), "a chart with several series names each one, since colour is never the only signal; add a label"
			}
		}
	}
	switch k.Kind {
	case ChartBars, ChartColumns, ChartStacked, ChartDonut:
		if k.Labels == nil {
			return at(kp, "labels"), fmt.Sprintf("a %s chart names each category; add labels, one per value", k.Kind)
		}
		fallthrough
	case ChartLine, ChartArea:
		for i, s := range k.Series {
			if k.Labels != nil && len(s.nums) != len(k.Labels) {
				return at(kp, "series", i, "values"), fmt.Sprintf("%d %s for %d %s; give one value per label",
					len(s.nums), plural(len(s.nums), "value"), len(k.Labels), plural(len(k.Labels), "label"))
			}
			if len(s.nums) != len(k.Series[0].nums) {
				return at(kp, "series", i, "values"), fmt.Sprintf("%d %s, and series 0 has %d; give every series the same number of values",
					len(s.nums), plural(len(s.nums), "value"), len(k.Series[0].nums))
			}
		}
	case ChartSparkline:
		if k.Labels != nil && len(k.Series) == 1 && len(k.Series[0].nums) != len(k.Labels) {
			return at(kp, "series", 0, "values"), fmt.Sprintf("%d %s for %d %s; give one value per label",
				len(k.Series[0].nums), plural(len(k.Series[0].nums), "value"), len(k.Labels), plural(len(k.Labels), "label"))
		}
		if k.Labels != nil && len(k.Series) > 1 {
			return at(kp, "labels"), "a sparkline with several series has no labels; remove them or draw one series"
		}
	case ChartGauge:
		v := k.Series[0].nums
		if len(v) == 2 && v[1] <= 0 {
			return at(kp, "series", 0, "values", 1), fmt.Sprintf("a gauge's max must be above 0, got %s; send [value, max] with max above 0, or [value] for a max of 100", formatNumber(v[1]))
		}
	}
	return "", ""
}

func (k *rasterKind) check(kp string) (string, string) {
	width := len(k.Rows[0])
	for i, r := range k.Rows {
		if len(r) != width {
			return at(kp, "rows", i), fmt.Sprintf("this row has %d cells and row 0 has %d; give every row the same number of cells (pad with spaces)", len(r), width)
		}
		for j := 0; j < len(r); j++ {
			c := r[j : j+1]
			if c == " " {
				continue
			}
			if _, ok := k.Palette[c]; !ok {
				return at(kp, "rows", i), fmt.Sprintf("cell %d is %s, which the palette does not name; add %s to palette", j, prose.Quote(c), prose.Quote(c))
			}
		}
	}
	for _, c := range sortedKeys(k.Legend) {
		if _, ok := k.Palette[c]; !ok {
			return at(kp, "legend", c), fmt.Sprintf("%s is not in the palette; explain only the palette's characters", prose.Quote(c))
		}
	}
	return "", ""
}

// imageMagic is the first bytes of each image type.
var imageMagic = map[string][]string{
	"image/png":  {"\x89PNG\r\n\x1a\n"},
	"image/jpeg": {"\xff\xd8\xff"},
	"image/gif":  {"GIF87a", "GIF89a"},
	"image/webp": {"RIFF"},
}

func (k *imageKind) check(kp string) (string, string) {
	b, err := base64.StdEncoding.DecodeString(k.Data)
	if err != nil {
		return at(kp, "data"), fmt.Sprintf("is not standard base64 (%v); encode the image's bytes with padding, no line breaks", err)
	}
	if len(b) > MaxImageBytes {
		return at(kp, "data"), fmt.Sprintf("the image is %s bytes once decoded, over the limit of 5 MB (%s bytes); send a smaller image",
			prose.Group(len(b)), prose.Group(MaxImageBytes))
	}
	ok := false
	for _, m := range imageMagic[k.Mime] {
		if bytes.HasPrefix(b, []byte(m)) && (k.Mime != "image/webp" || len(b) >= 12 && string(b[8:12]) == "WEBP") {
			ok = true
		}
	}
	if !ok {
		return at(kp, "data"), fmt.Sprintf("the bytes are not %s; send the image's own bytes, or the mime that matches them", shortMime(k.Mime))
	}
	return "", ""
}

func shortMime(m string) string {
	return strings.ToUpper(strings.TrimPrefix(m, "image/"))
}
