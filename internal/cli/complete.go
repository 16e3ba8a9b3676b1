package cli

import (
	"context"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/store"
	"github.com/nearnative/nearnative/internal/study"
)

// Shell completion: cobra's `completion` command writes the script; the
// functions here give its dynamic values (study names, platform names, run
// IDs, a study's workloads and their parameters). They never fail: a value
// they cannot find is left out.

// completeStudies offers the built-in studies; a word that looks like a
// path, or matches no study, completes as a YAML file.
func completeStudies(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	yaml := []string{"yaml", "yml"}
	if strings.ContainsAny(toComplete, `/.`) {
		return yaml, cobra.ShellCompDirectiveFilterFileExt
	}
	infos, _ := study.Builtins()
	var out []string
	for _, i := range infos {
		if strings.HasPrefix(i.Name, toComplete) {
			out = append(out, i.Name+"\t"+firstClause(i.Description))
		}
	}
	if len(out) == 0 {
		return yaml, cobra.ShellCompDirectiveFilterFileExt
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeStudy completes the one STUDY argument of run.
func completeStudy(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return completeStudies(c, args, toComplete)
}

// firstClause shortens a description for a completion menu.
func firstClause(s string) string {
	if i := strings.IndexAny(s, ",:("); i > 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// completeRuns offers the stored runs' IDs, newest first, and with last
// "last", for commands that take up to max of them (0: any number). It
// opens the result database only when it exists (a SQLite file) or is a
// server, so completing never creates one.
func (a *app) completeRuns(max int, last bool) cobra.CompletionFunc {
	return func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if max > 0 && len(args) >= max {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		out := []string{}
		if last && strings.HasPrefix("last", toComplete) {
			out = append(out, "last\tthe newest run")
		}
		if !strings.Contains(a.db, "://") {
			if _, err := os.Stat(a.db); err != nil {
				return out, cobra.ShellCompDirectiveNoFileComp
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		db, err := store.Open(ctx, a.db)
		if err != nil {
			return out, cobra.ShellCompDirectiveNoFileComp
		}
		defer db.Close()
		runs, _ := db.Runs(ctx)
		for _, r := range runs {
			if strings.HasPrefix(string(r.ID), toComplete) {
				out = append(out, string(r.ID)+"\t"+r.Study+" "+r.Started.Local().Format("2006-01-02 15:04")+" "+r.Status)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeList completes one item of a comma-separated list: the items
// before the last comma are kept, and the shell adds no space so that
// another can follow.
func completeList(toComplete string, items []string) ([]string, cobra.ShellCompDirective) {
	done := ""
	if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
		done = toComplete[:i+1]
	}
	already := map[string]bool{}
	for _, x := range strings.Split(done, ",") {
		already[x] = true
	}
	var out []string
	for _, it := range items {
		if !already[it] && strings.HasPrefix(done+it, toComplete) {
			out = append(out, done+it)
		}
	}
	return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
}

// argStudy loads the study named by the first argument, nil when there is
// none or it does not load.
func (a *app) argStudy(args []string) *study.Study {
	if len(args) == 0 {
		return nil
	}
	st, err := study.Load(args[0], a.reg)
	if err != nil {
		return nil
	}
	return st
}

// completePlatforms offers the study's platforms and the built-in ones
// for --platforms.
func (a *app) completePlatforms(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	var names []string
	if st := a.argStudy(args); st != nil {
		names = st.PlatformNames()
	}
	for _, n := range platform.BuiltinNames() {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return completeList(toComplete, names)
}

// completeWorkloads offers the study's workloads for --workloads.
func (a *app) completeWorkloads(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	st := a.argStudy(args)
	if st == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, w := range st.Workloads {
		names = append(names, w.Name)
	}
	return completeList(toComplete, names)
}

// completeSet offers "workload." and then "workload.param=" for --set.
func (a *app) completeSet(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	st := a.argStudy(args)
	if st == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, w := range st.Workloads {
		prefix := w.Name + "."
		if !strings.HasPrefix(toComplete, prefix) {
			if strings.HasPrefix(prefix, toComplete) {
				out = append(out, prefix)
			}
			continue
		}
		kind, ok := a.reg.Get(w.Kind)
		if !ok {
			continue
		}
		for _, p := range kind.Params() {
			if s := prefix + p.Name + "="; strings.HasPrefix(s, toComplete) {
				out = append(out, s)
			}
		}
	}
	return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
}

// fixedValues completes a flag from a fixed list.
func fixedValues(values ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}
