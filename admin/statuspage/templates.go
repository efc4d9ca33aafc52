package statuspage

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"net/url"
	"strings"
	"time"
)

// parse reads the embedded templates with the functions they use.
func (p *Page) parse() (*template.Template, error) {
	var t *template.Template
	funcs := template.FuncMap{
		// section renders the template of an overview section.
		"section": func(s sectionView) (template.HTML, error) {
			var b bytes.Buffer
			err := t.ExecuteTemplate(&b, "section-"+s.Name, s)
			return template.HTML(b.String()), err //nolint:gosec // the output of html/template
		},
		"addr": func(s string) string {
			if p.opts.ShowAddresses {
				return s
			}
			return maskAddress(s)
		},
		"text": func(s string) string {
			if p.opts.ShowAddresses {
				return s
			}
			return maskText(s)
		},
		"age":      age,
		"at":       func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"pct":      func(f float64) string { return fmt.Sprintf("%.1f %%", 100*f) },
		"path":     url.PathEscape,
		"rulename": ruleName,
		"ok":       func(f float64) bool { return f < 0.05 },
		"join":     strings.Join,
	}
	t = template.New("").Funcs(funcs)
	return t.ParseFS(files, "templates/*.html")
}

// age writes d for a person: 45s, 12m, 3h05m, 2d4h.
func age(d time.Duration) string {
	switch s := d.Round(time.Second); {
	case s <= 0:
		return "0s"
	case s < time.Minute:
		return fmt.Sprintf("%ds", int(s.Seconds()))
	case s < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(s.Minutes()), int(math.Mod(s.Seconds(), 60)))
	case s < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(s.Hours()), int(math.Mod(s.Minutes(), 60)))
	default:
		return fmt.Sprintf("%dd%dh", int(s.Hours())/24, int(s.Hours())%24)
	}
}
