package search

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A search that ends without a failing step above its best pass has not
// found a maximum: it stopped at a limit of its own making (the data loaded
// for so many users, the users or the rate it may try, its step cap), and
// its best pass is only a lower bound of the real maximum. Reporting it as
// a maximum would make a ratio of two ceilings (1.000 [1.000, 1.000]) look
// like a result. Every find-max workload stores such a result with the note
// Ceiling.Note makes, and the analysis reads it back with ParseCeiling:
// the value is shown as ">= value (limit)", with no ratio and no verdict.
//
// The other side is a search with no pass standing when it stopped (every
// load failed down to the smallest it may try, or to where its step cap
// ended it): no maximum either, but an upper bound, the lowest load that
// failed, shown as "< value (limit)" under the same rules (Ceiling.Below).

// CeilingPrefix starts the trial note of a result that is a lower bound.
const CeilingPrefix = "ceiling: "

// Ceiling is a find-max result that reached a limit of the search's own: a
// lower bound of the real maximum (the ceiling the name is for) or, Below,
// an upper bound (the floor FloorOf returns). Both are one note format and
// one rule in the analysis, so they are one type.
type Ceiling struct {
	// Metric is the trial's metric that holds the search's result.
	Metric string
	// Value is the best pass: the real maximum is at least this.
	Value float64
	// Is names the limit: "the data's limit", "the rate cap".
	Is string
	// Below marks an upper bound: no pass stood when the search stopped
	// and Value is the lowest load that failed, so the real maximum is
	// below it.
	Below bool
}

// Op is the bound's relation to the real maximum: ">=" or "<".
func (c Ceiling) Op() string { return BoundOp(c.Below) }

// BoundOp is how a bound relates to the real maximum: ">=" for a lower
// bound, "<" for an upper one (below). Every table that shows a bound
// writes it with this.
func BoundOp(below bool) string {
	if below {
		return "<"
	}
	return ">="
}

// CeilingOf returns the ceiling a finished search's decision reached, for
// the trial metric that holds its result; false when the search found a
// failing step above its maximum (or no pass at all).
func (d Decision) CeilingOf(metric string) (Ceiling, bool) {
	if !d.Done || !d.Found || !d.Ceiling {
		return Ceiling{}, false
	}
	return Ceiling{Metric: metric, Value: d.Max, Is: d.CeilingIs}, true
}

// FloorOf returns the upper bound a finished search with no standing pass
// reached (Decision.Floor), for the trial metric that holds its result;
// false when a pass stands.
func (d Decision) FloorOf(metric string) (Ceiling, bool) {
	if !d.Done || d.Found || !d.Floor {
		return Ceiling{}, false
	}
	return Ceiling{Metric: metric, Value: d.FloorAt, Is: d.FloorIs, Below: true}, true
}

// Note is the trial note that marks the metric as a lower bound (or, Below,
// an upper one).
func (c Ceiling) Note() string {
	if c.Below {
		return fmt.Sprintf("%s%s < %s (%s): no load the search tried passed (or a later step overruled the pass), and it stopped at this limit of its own, so it found no maximum; the value, the lowest load that failed, is an upper bound and gets no ratio or verdict",
			CeilingPrefix, c.Metric, strconv.FormatFloat(c.Value, 'g', -1, 64), c.Is)
	}
	return fmt.Sprintf("%s%s >= %s (%s): the search stopped at this limit of its own with no failing step above its best pass, so it found no maximum; the value is a lower bound and gets no ratio or verdict",
		CeilingPrefix, c.Metric, strconv.FormatFloat(c.Value, 'g', -1, 64), c.Is)
}

var ceilingNote = regexp.MustCompile(`^` + regexp.QuoteMeta(CeilingPrefix) + `(\S+) (>=|<) (\S+) \(([^()]*)\)`)

// ParseCeiling reads a note Note wrote; false for any other note.
func ParseCeiling(note string) (Ceiling, bool) {
	if !strings.HasPrefix(note, CeilingPrefix) {
		return Ceiling{}, false
	}
	m := ceilingNote.FindStringSubmatch(note)
	if m == nil {
		return Ceiling{}, false
	}
	v, err := strconv.ParseFloat(m[3], 64)
	if err != nil {
		return Ceiling{}, false
	}
	return Ceiling{Metric: m[1], Value: v, Is: m[4], Below: m[2] == "<"}, true
}
