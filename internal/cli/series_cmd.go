package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nearnative/nearnative/internal/store"
)

// seriesDoc is the JSON `nearnative series` writes: per trial, the search
// steps (find-max) and the per-second driver series.
type seriesDoc struct {
	Run    string        `json:"run_id"`
	Study  string        `json:"study"`
	Trials []seriesTrial `json:"trials"`
}

type seriesTrial struct {
	Round    int                 `json:"round"`
	Warmup   bool                `json:"warmup"`
	Workload string              `json:"workload"`
	Platform string              `json:"platform"`
	Error    string              `json:"error,omitempty"`
	Steps    []seriesStep        `json:"steps"`
	Series   []store.SeriesPoint `json:"series"`
}

type seriesStep struct {
	Seq       int             `json:"seq"`
	Phase     string          `json:"phase"`
	Value     float64         `json:"value"`
	Pass      bool            `json:"pass"`
	Started   string          `json:"started,omitempty"`
	DurationS float64         `json:"duration_s"`
	Summary   string          `json:"summary"`
	Detail    json.RawMessage `json:"detail,omitempty"`
}

func (a *app) seriesCmd() *cobra.Command {
	var format, outPath, jsonOut string
	c := &cobra.Command{
		Use:   "series RUN [--format json] [-o FILE]",
		Short: "Write a stored run's per-second driver series and search steps as JSON",
		Long: `Write, for every trial of a stored run driven by nearnative's own driver, the
per-second series (operations, failures and latency percentiles per second and
operation, every phase) and, for find-max workloads, each search step with its
outcome and full record. The output goes to standard output unless -o names a
file. (--json FILE, the old spelling, still works and says so.)`,
		Example: `  nearnative series last | jq '.trials[0].steps'
  nearnative series 20261126-0912 -o series.json`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeRuns(1, true),
		RunE: func(c *cobra.Command, args []string) error {
			flag := "-o"
			oldSpelling(a.stderr, c, "json", "--format json -o FILE (--json on run and show writes the run's results)")
			switch {
			case jsonOut != "" && (c.Flags().Changed("format") || c.Flags().Changed("output")):
				return withCode(ExitBadInput, errors.New("--json is the old spelling of --format json -o FILE: give one or the other"))
			case jsonOut != "":
				outPath, flag = jsonOut, "--json"
			case format != "json":
				return withCode(ExitBadInput, fmt.Errorf("--format %q: the series are written as json only", format))
			}
			doc, err := a.seriesOf(c.Context(), args[0])
			if err != nil {
				return err
			}
			data, err := json.MarshalIndent(doc, "", "  ")
			if err != nil {
				return fmt.Errorf("encoding the series: %w", err)
			}
			return a.writeOutputs([]outFile{{flag, outPath, append(data, '\n')}}, fmt.Sprintf(" (%d trials)", len(doc.Trials)))
		},
	}
	fl := c.Flags()
	fl.StringVar(&format, "format", "json", "json (the only format)")
	fl.StringVarP(&outPath, "output", "o", Stdout, "write to this `FILE` (- for standard output)")
	fl.StringVar(&jsonOut, "json", "", "write the series as JSON to this file")
	fl.MarkHidden("json")
	c.RegisterFlagCompletionFunc("format", fixedValues("json"))
	return c
}

// seriesOf reads the per-second series and search steps of every trial of
// the run ref names.
func (a *app) seriesOf(ctx context.Context, ref string) (seriesDoc, error) {
	db, err := a.openStore(ctx)
	if err != nil {
		return seriesDoc{}, err
	}
	defer db.Close()
	steps, ok1 := db.(store.StepStore)
	series, ok2 := db.(store.SeriesStore)
	if !ok1 || !ok2 {
		return seriesDoc{}, withCode(ExitUnavailable, errors.New("this result database keeps no series"))
	}
	s, err := a.loadRun(ctx, db, ref)
	if err != nil {
		return seriesDoc{}, err
	}
	doc := seriesDoc{Run: string(s.run.ID), Study: s.run.Study, Trials: []seriesTrial{}}
	for _, t := range s.trials {
		key := store.TrialKey{Run: s.run.ID, Round: t.Round, Workload: t.Workload, Platform: t.Platform}
		st, err := steps.Steps(ctx, key)
		if err != nil {
			return seriesDoc{}, err
		}
		pts, err := series.Series(ctx, key)
		if err != nil {
			return seriesDoc{}, err
		}
		tr := seriesTrial{Round: t.Round, Warmup: t.Warmup, Workload: t.Workload, Platform: t.Platform, Error: t.Error,
			Steps: []seriesStep{}, Series: pts}
		if tr.Series == nil {
			tr.Series = []store.SeriesPoint{}
		}
		for _, x := range st {
			tr.Steps = append(tr.Steps, seriesStepOf(x))
		}
		doc.Trials = append(doc.Trials, tr)
	}
	return doc, nil
}

// seriesStepOf is a stored search step as the series document writes it.
func seriesStepOf(x store.Step) seriesStep {
	ss := seriesStep{Seq: x.Seq, Phase: x.Phase, Value: x.Value, Pass: x.Pass, DurationS: x.Duration.Seconds(), Summary: x.Summary}
	if !x.Started.IsZero() {
		ss.Started = x.Started.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	if json.Valid(x.Detail) {
		ss.Detail = x.Detail
	}
	return ss
}
