package htmlreport

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// chromiumPath is Debian's chromium package's binary (scripts/setup.sh
// installs it).
const chromiumPath = "/usr/bin/chromium"

// chromium runs headless Chromium with args after the flags that keep it
// off the network and away from the user's profile.
func chromium(t *testing.T, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, chromiumPath, append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.Bytes())
	}
	return stdout.Bytes()
}

// TestHTMLInChromium opens the fixture's report in headless Chromium: the
// DOM it builds must hold one bar per platform and metric and a dot per
// counted trial, and the screenshot must show something drawn.
func TestHTMLInChromium(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		if testing.Short() {
			t.Skipf("%s is not installed (apt-get install -y chromium): skipping the browser test under -short", chromiumPath)
		}
		t.Fatalf("%s is not installed (apt-get install -y chromium, or scripts/setup.sh); only -short skips this test", chromiumPath)
	}
	in := fixtureInput(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := Write(&b, in); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	url := "file://" + page

	dom := chromium(t, "--dump-dom", url)
	bars, dots := 0, 0
	for _, tab := range in.Result.Tables {
		bars += len(tab.Cells)
		for _, c := range tab.Cells {
			dots += len(c.Values)
		}
	}
	count := func(re string) int { return len(regexp.MustCompile(re).FindAll(dom, -1)) }
	if got := count(`<rect[^>]*class="bar[ "]`); got != bars {
		t.Errorf("the browser's DOM has %d bar rects, want %d", got, bars)
	}
	if got := count(`<circle[^>]*class="trial"`); got != dots {
		t.Errorf("the browser's DOM has %d trial dots, want %d", got, dots)
	}
	if got := count(`<svg[^>]*class="chart"`); got != len(in.Result.Tables) {
		t.Errorf("the browser's DOM has %d charts, want %d", got, len(in.Result.Tables))
	}

	shot := filepath.Join(dir, "report.png")
	chromium(t, "--screenshot="+shot, "--window-size=1200,2000", "--hide-scrollbars", url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	bounds := img.Bounds()
	nonWhite, colored := 0, 0
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if r < 0xf000 || g < 0xf000 || b < 0xf000 {
				nonWhite++
			}
			// The bars' fills are clearly coloured: channels far apart.
			if max(r, g, b)-min(r, g, b) > 0x3000 {
				colored++
			}
		}
	}
	total := bounds.Dx() * bounds.Dy()
	t.Logf("screenshot %dx%d: %d non-white pixels, %d coloured", bounds.Dx(), bounds.Dy(), nonWhite, colored)
	if nonWhite < total/100 {
		t.Errorf("screenshot is almost blank: %d of %d pixels are not white", nonWhite, total)
	}
	// Nine bars of 56 px width and at least ~40 px height each, most coloured.
	if colored < 9*56*40/2 {
		t.Errorf("screenshot shows too few coloured pixels (%d) for %d bars", colored, bars)
	}
	if os.Getenv("NEARNATIVE_KEEP_SCREENSHOT") != "" {
		data, _ := os.ReadFile(shot)
		os.WriteFile(os.Getenv("NEARNATIVE_KEEP_SCREENSHOT"), data, 0o644)
	}
}
