package statuspage

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMaskText(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		// Text without an address is left as it is.
		{"no address", "421 4.7.0 try again later", "421 4.7.0 try again later"},
		{"no address, with atext and delimiters", "Tom & Jerry: a=b?c/d, it's 50% off (%40 too) & more; see https://shop.example/a?b=c&d=e",
			"Tom & Jerry: a=b?c/d, it's 50% off (%40 too) & more; see https://shop.example/a?b=c&d=e"},
		{"no address, HTML", `<p class="x">Caf&eacute; &amp; bar &#64; noon &commat; 12.00</p>`, `<p class="x">Caf&eacute; &amp; bar &#64; noon &commat; 12.00</p>`},
		{"empty", "", ""},

		// The domain stays readable; the local part shows its first character.
		{"plain", "550 5.1.1 <bob@example.com>: no such user", "550 5.1.1 <b***@example.com>: no such user"},
		{"two", "ann@example.com, bob@example.org", "a***@example.com, b***@example.org"},
		{"UTF-8", "Grüße an jürgen@bücher.example!", "Grüße an j***@bücher.example!"},
		{"mailto", "<mailto:unsub@shop.example>", "<mailto:u***@shop.example>"},

		// The whole local part, with every character an address may have there.
		{"ampersand", "Dear tom&jerry@example.com,", "Dear t***@example.com,"},
		{"apostrophe", "(o'brien@example.com)", "(o***@example.com)"},
		{"slash, equals, question mark", "a/b=c?d@example.com", "a***@example.com"},
		{"VERP: the recipient in the bounce address", "Return-Path: <bounces+zoe=example.com@shop.example>", "Return-Path: <b***@shop.example>"},
		{"quoted", `to "zoe secret"@example.com now`, `to "***@example.com now`},

		// In a URL the query's delimiters are taken too: more than the
		// address is masked, never less.
		{"in a query", "https://shop.example/prefs?email=zoe@example.com&x=1", "https:/***@example.com&x=1"},

		// The '@' percent-encoded: a preferences or unsubscribe link.
		{"URL-encoded", "https://shop.example/prefs?email=zoe.secret%40example.com", "https:/***%40example.com"},
		{"URL-encoded, encoded local part", "u=zoe%2Bnews%40example.com", "u***%40example.com"},
		{"URL-encoded twice (a tracked link)", "https://click.example/r?to=https%3A%2F%2Fshop.example%2Fu%3Fe%3Dzoe.secret%2540example.com", "https:/***%2540example.com"},
		{"URL-encoded domain", "e=zoe%40%C3%A9cole.example", "e***%40%C3%A9cole.example"},

		// An HTML body shown as source: the characters written as references.
		{"HTML &amp;", "<b>tom&amp;jerry@example.com</b>", "<b>t***@example.com</b>"},
		{"HTML &#39; (html/template's apostrophe)", "<b>o&#39;brien@example.com</b>", "<b>o***@example.com</b>"},
		{"HTML &#43; (html/template's plus)", "<b>zoe&#43;news@example.com</b>", "<b>z***@example.com</b>"},
		{"HTML &#64;", "zoe&#64;example.com", "z***&#64;example.com"},
		{"HTML &#x40;", "zoe&#x40;example.com", "z***&#x40;example.com"},
		{"HTML &commat;", "zoe&commat;example.com", "z***&commat;example.com"},
		{"HTML &lt; is not in the address", "Zoe &lt;zoe@example.com&gt;", "Zoe &lt;z***@example.com&gt;"},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, maskText(c.in))
		})
	}
}

func TestMaskAddress(t *testing.T) {
	assert.Equal(t, "j***@example.com", maskAddress("john@example.com"))
	assert.Equal(t, "t***@example.com", maskAddress("tom&jerry@example.com"))
	assert.Equal(t, "o***@example.com", maskAddress("o'brien@example.com"))
	assert.Equal(t, "***", maskAddress("no address"))
}
