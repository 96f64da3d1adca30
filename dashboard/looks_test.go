package dashboard_test

import (
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// themes reads app.css's colour variables: the light theme (its :root
// rules, later ones overriding) and the dark (the light one overridden
// by the prefers-color-scheme: dark rules).
func themes(t *testing.T) (light, dark map[string]string) {
	t.Helper()
	data, err := os.ReadFile("static/app.css")
	if err != nil {
		t.Fatal(err)
	}
	css := string(data)
	darkRE := regexp.MustCompile(`(?s)@media \(prefers-color-scheme: dark\) \{\s*:root \{([^}]*)\}\s*\}`)
	rootRE := regexp.MustCompile(`(?s):root \{([^}]*)\}`)
	varRE := regexp.MustCompile(`--([a-z-]+):\s*(#[0-9a-fA-F]{3,6})\b`)
	light, dark = map[string]string{}, map[string]string{}
	for _, m := range rootRE.FindAllStringSubmatch(darkRE.ReplaceAllString(css, ""), -1) {
		for _, v := range varRE.FindAllStringSubmatch(m[1], -1) {
			light[v[1]] = v[2]
		}
	}
	for k, v := range light {
		dark[k] = v
	}
	blocks := darkRE.FindAllStringSubmatch(css, -1)
	if len(blocks) == 0 {
		t.Fatal("app.css has no dark theme")
	}
	for _, m := range blocks {
		for _, v := range varRE.FindAllStringSubmatch(m[1], -1) {
			dark[v[1]] = v[2]
		}
	}
	return light, dark
}

// luminance is a colour's relative luminance (WCAG 2).
func luminance(t *testing.T, hex string) float64 {
	t.Helper()
	h := strings.TrimPrefix(hex, "#")
	if len(h) == 3 {
		h = string([]byte{h[0], h[0], h[1], h[1], h[2], h[2]})
	}
	var c [3]float64
	for i := range c {
		n, err := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		if err != nil {
			t.Fatalf("colour %q: %v", hex, err)
		}
		v := float64(n) / 255
		if v <= 0.04045 {
			c[i] = v / 12.92
		} else {
			c[i] = math.Pow((v+0.055)/1.055, 2.4)
		}
	}
	return 0.2126*c[0] + 0.7152*c[1] + 0.0722*c[2]
}

func contrast(t *testing.T, a, b string) float64 {
	la, lb := luminance(t, a), luminance(t, b)
	return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)
}

// TestContrast checks, in both themes, that each colour of text meets
// WCAG AA (4.5:1) against each background it is drawn on, and focus
// rings and control borders 3:1 (non-text contrast).
func TestContrast(t *testing.T) {
	light, dark := themes(t)
	text := map[string][]string{ // text colour: the backgrounds it is on
		"fg":    {"bg", "soft", "tag", "note", "current", "run-bg", "ok-bg", "bad-bg", "warn-bg"},
		"muted": {"bg", "soft", "tag", "note", "current"},
		"link":  {"bg", "soft", "note", "current"},
		"ok":    {"bg", "soft", "ok-bg"},
		"bad":   {"bg", "soft", "bad-bg", "note"},
		"warn":  {"bg", "warn-bg"},
		"run":   {"bg", "run-bg"},
	}
	ui := map[string][]string{"focus": {"bg", "soft", "note", "current"}, "control": {"bg", "soft"}}
	for name, th := range map[string]map[string]string{"light": light, "dark": dark} {
		check := func(pairs map[string][]string, least float64) {
			for fg, bgs := range pairs {
				for _, bg := range bgs {
					if th[fg] == "" || th[bg] == "" {
						t.Errorf("%s theme: --%s or --%s is not defined", name, fg, bg)
						continue
					}
					if r := contrast(t, th[fg], th[bg]); r < least {
						t.Errorf("%s theme: --%s %s on --%s %s is %.2f:1, under %.1f:1", name, fg, th[fg], bg, th[bg], r, least)
					}
				}
			}
		}
		check(text, 4.5)
		check(ui, 3)
	}
	if light["bg"] == dark["bg"] {
		t.Error("the dark theme keeps the light background")
	}
}
