package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/nearnative/nearnative/internal/platform"
	"github.com/nearnative/nearnative/internal/stats"
	"github.com/nearnative/nearnative/internal/study"
)

// commands returns every command of the tree a user can call (the hidden
// ones are not).
func commands(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	if !c.Hidden {
		out = append(out, c)
	}
	for _, sub := range c.Commands() {
		out = append(out, commands(sub)...)
	}
	return out
}

func testRoot() *cobra.Command {
	a := &app{stdout: io.Discard, stderr: io.Discard, reg: Registry()}
	return a.rootCmd()
}

// TestEveryCommandHasExamples: every command's help has an Example block,
// and each of its nearnative lines parses against the CLI.
func TestEveryCommandHasExamples(t *testing.T) {
	all := commands(testRoot())
	if len(all) < 20 {
		t.Fatalf("%d commands: the tree is not built as nearnative runs it", len(all))
	}
	for _, c := range all {
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s: no Example", c.CommandPath())
			continue
		}
		lines := commandLines(c.CommandPath(), "```\n"+c.Example+"\n```")
		if len(lines) == 0 {
			t.Errorf("%s: no nearnative command among its examples:\n%s", c.CommandPath(), c.Example)
		}
		for _, l := range lines {
			if err := checkCommandLine(l.text); err != nil {
				t.Errorf("%s example `%s`: %v", c.CommandPath(), l.text, err)
			}
		}
	}
}

// TestHelpNamesTheIntervalMethods: the interval method that run's and
// compare's help name is the one stats chooses (paired by round for run,
// unpaired for compare), and no other method is named.
func TestHelpNamesTheIntervalMethods(t *testing.T) {
	root := testRoot()
	for _, tc := range []struct {
		cmd    string
		paired bool
	}{{"run", true}, {"compare", false}} {
		c, _, err := root.Find([]string{tc.cmd})
		if err != nil {
			t.Fatal(err)
		}
		help := strings.Join(strings.Fields(c.Long), " ")
		chosen := map[stats.Method]bool{
			stats.Choose(stats.MeanStatistic, tc.paired): true,
			stats.Choose(stats.TailStatistic, tc.paired): true,
		}
		bootstrap := false
		for m := range chosen {
			if !strings.Contains(help, m.Describe(tc.paired)) {
				t.Errorf("%s's help does not name the method stats chooses, %q:\n%s", tc.cmd, m.Describe(tc.paired), help)
			}
			bootstrap = bootstrap || strings.Contains(m.Describe(tc.paired), "bootstrap")
		}
		for _, m := range stats.Methods() {
			if !chosen[m] && strings.Contains(help, m.Describe(tc.paired)) {
				t.Errorf("%s's help names %q, which stats does not choose", tc.cmd, m.Describe(tc.paired))
			}
		}
		if !bootstrap && strings.Contains(strings.ToLower(help), "bootstrap") {
			t.Errorf("%s's help says bootstrap, but stats chooses %v", tc.cmd, chosen)
		}
		if strings.Contains(help, "paired") != true || strings.Contains(help, "unpaired") == tc.paired {
			t.Errorf("%s's help does not say whether its intervals are paired (paired: %v):\n%s", tc.cmd, tc.paired, help)
		}
	}
}

// TestHelpMatchesTheCode: the root help names every family of platforms;
// run's help does not promise a warm-up round the built-in studies do not
// all have.
func TestHelpMatchesTheCode(t *testing.T) {
	root := testRoot()
	long := strings.Join(strings.Fields(root.Long), " ")
	families := map[string]string{"docker-": "Docker", "vm": "VM", "k8s-": "Kubernetes"}
	for _, p := range platform.BuiltinNames() {
		for prefix, word := range families {
			if strings.HasPrefix(p, prefix) && !strings.Contains(long, word) {
				t.Errorf("root help does not mention %s (platform %s):\n%s", word, p, long)
			}
		}
	}
	run, _, _ := root.Find([]string{"run"})
	help := strings.Join(strings.Fields(run.Long), " ")
	infos, err := study.Builtins()
	if err != nil {
		t.Fatal(err)
	}
	noWarmup := 0
	for _, i := range infos {
		for _, quick := range []bool{false, true} {
			st, err := study.Load(i.Name, Registry())
			if err != nil {
				t.Fatal(err)
			}
			if quick && st.Quick.Warmup != nil {
				st.Warmup = *st.Quick.Warmup
			}
			if st.Warmup == 0 {
				noWarmup++
			}
		}
	}
	if noWarmup > 0 && strings.Contains(help, "the first round is warm-up") {
		t.Errorf("run's help says the first round is warm-up, but %d built-in runs have none:\n%s", noWarmup, help)
	}
}
