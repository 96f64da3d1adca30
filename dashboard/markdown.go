package dashboard

import (
	"bytes"
	"html/template"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// md renders an agent's Markdown. goldmark without its unsafe option
// writes no raw HTML from the text (it leaves a comment in its place) and
// no link or image whose URL is javascript:, vbscript:, file: or data:
// other than an image: what an agent writes cannot run in the page.
var md = goldmark.New(goldmark.WithExtensions(extension.Table, extension.Strikethrough))

// maxMarkdown bounds the text rendered as Markdown at once; past it the
// text is shown as it is, escaped.
const maxMarkdown = 2 << 20

// markdown renders s as safe HTML.
func markdown(s string) template.HTML {
	if len(s) > maxMarkdown {
		return template.HTML("<pre>" + template.HTMLEscapeString(s) + "</pre>")
	}
	var b bytes.Buffer
	if err := md.Convert([]byte(s), &b); err != nil {
		return template.HTML("<pre>" + template.HTMLEscapeString(s) + "</pre>")
	}
	return template.HTML(b.String())
}
