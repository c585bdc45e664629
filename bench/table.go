package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// agg says how a row's per-run values are summarised.
type agg uint8

const (
	aggMedian agg = iota // median ± spread
	aggMax               // worst run (counts that must be 0)
)

type row struct {
	key   string
	unit  string
	agg   agg
	cells map[string][]float64
	notes map[string]string
}

// Table collects per-run values by row and column, in insertion order.
type Table struct {
	rows  []*row
	index map[string]*row
	cols  []string
}

func newTable(cols []string) *Table { return &Table{index: make(map[string]*row), cols: cols} }

func (t *Table) row(key, unit string, a agg) *row {
	r := t.index[key]
	if r == nil {
		r = &row{key: key, unit: unit, agg: a, cells: make(map[string][]float64), notes: make(map[string]string)}
		t.index[key] = r
		t.rows = append(t.rows, r)
	}
	return r
}

// Add records one run's value of row key for column col.
func (t *Table) Add(key, unit string, a agg, col string, v float64) {
	r := t.row(key, unit, a)
	r.cells[col] = append(r.cells[col], v)
}

// Note puts a text in a cell that has no figure (e.g. "blocks").
func (t *Table) Note(key, unit string, a agg, col, text string) {
	t.row(key, unit, a).notes[col] = text
}

// Median returns the median of row key, column col.
func (t *Table) Median(key, col string) (float64, bool) {
	r := t.index[key]
	if r == nil || len(r.cells[col]) == 0 {
		return 0, false
	}
	m, _ := medianSpread(r.cells[col])
	return m, true
}

func medianSpread(v []float64) (median, spread float64) {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		median = s[n/2]
	} else {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	if median != 0 {
		spread = (s[n-1] - s[0]) / 2 / math.Abs(median) * 100
	}
	return median, spread
}

func fmtNum(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case a >= 1e7:
		return fmt.Sprintf("%.3g", v)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.3f", v)
	case a >= 0.01:
		return fmt.Sprintf("%.3f", v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}

func (t *Table) cell(r *row, col string) string {
	if n, ok := r.notes[col]; ok {
		return n
	}
	v := r.cells[col]
	if len(v) == 0 {
		return "–"
	}
	if r.agg == aggMax {
		return fmtNum(slices.Max(v))
	}
	m, s := medianSpread(v)
	if len(v) == 1 || s < 0.5 {
		return fmtNum(m)
	}
	return fmt.Sprintf("%s ±%.0f%%", fmtNum(m), s)
}

// Print writes the table as Markdown.
func (t *Table) Print(w io.Writer) {
	hdr := append([]string{"workload", "unit"}, t.cols...)
	lines := [][]string{hdr}
	for _, r := range t.rows {
		l := []string{r.key, r.unit}
		for _, c := range t.cols {
			l = append(l, t.cell(r, c))
		}
		lines = append(lines, l)
	}
	width := make([]int, len(hdr))
	for _, l := range lines {
		for i, c := range l {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	for li, l := range lines {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range l {
			pad := width[i] - len([]rune(c))
			if i < 2 {
				b.WriteString(" " + c + strings.Repeat(" ", pad) + " |")
			} else {
				b.WriteString(" " + strings.Repeat(" ", pad) + c + " |")
			}
		}
		fmt.Fprintln(w, b.String())
		if li == 0 {
			b.Reset()
			b.WriteString("|")
			for i := range l {
				if i < 2 {
					b.WriteString(" " + strings.Repeat("-", width[i]) + " |")
				} else {
					b.WriteString(" " + strings.Repeat("-", width[i]-1) + ": |")
				}
			}
			fmt.Fprintln(w, b.String())
		}
	}
}

// Ratio returns the median and spread (±%) of the per-run ratios a ÷ b of
// row key: runs are paired by index (the systems of run i ran side by side,
// in rotated order).
func (t *Table) Ratio(key, a, b string) (median, spread float64, ok bool) {
	r := t.index[key]
	if r == nil {
		return 0, 0, false
	}
	va, vb := r.cells[a], r.cells[b]
	n := min(len(va), len(vb))
	if n == 0 {
		return 0, 0, false
	}
	ratios := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		if vb[i] > 0 {
			ratios = append(ratios, va[i]/vb[i])
		}
	}
	if len(ratios) == 0 {
		return 0, 0, false
	}
	median, spread = medianSpread(ratios)
	return median, spread, true
}
