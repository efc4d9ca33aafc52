package unsubscribe

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/mailspool/mailspool/queue"
	"github.com/mailspool/mailspool/suppress"
	"github.com/mailspool/mailspool/transport"
)

// Links says where a bulk mail's unsubscribe links point.
type Links struct {
	// URL is the public base URL of Handler, ending in "/u/": the token is
	// appended ("https://mail.example.com/u/"). https only.
	URL string
	// Mailto, when not "", is an address added as a second
	// List-Unsubscribe method, with the token as its subject. mailspool
	// does not read that mailbox; it is for the mail clients that only
	// offer mailto.
	Mailto string
}

// maxURL bounds Links.URL, so that a header with the longest token stays
// under a line's 998 characters.
const maxURL = 200

// Check reports what is wrong with l.
func (l Links) Check() error {
	u, err := url.Parse(l.URL)
	switch {
	case l.URL == "":
		return fmt.Errorf("unsubscribe: url missing (the public address of mailspool serve's /u/, e.g. https://mail.example.com/u/)")
	case err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("unsubscribe: url %q: want https://HOST/.../u/ (RFC 8058 asks for https)", l.URL)
	case !strings.HasSuffix(u.Path, "/u/"):
		return fmt.Errorf("unsubscribe: url %q: must end in /u/, where mailspool serve answers", l.URL)
	case len(l.URL) > maxURL:
		return fmt.Errorf("unsubscribe: url of %d bytes, at most %d", len(l.URL), maxURL)
	}
	if l.Mailto != "" {
		if _, err := suppress.Normalize(l.Mailto); err != nil || strings.ContainsAny(l.Mailto, "<>?") {
			return fmt.Errorf("unsubscribe: mailto %q is not a bare address", l.Mailto)
		}
	}
	return nil
}

// The headers a bulk lane adds; the caller may not set them.
const (
	HeaderUnsubscribe     = "List-Unsubscribe"
	HeaderUnsubscribePost = "List-Unsubscribe-Post"
	HeaderListID          = "List-Id"
)

// Lane returns the queue.Screen of a bulk lane named lane on list, under
// its suppression policy p: suppress.List.Screen's, that also adds the
// unsubscribe headers to each mail when it is stored and checks the scope
// of the mail's list: the list named at enqueue, or the lane's own name.
//
// A list's unsubscribes are recorded under the list's name as their
// suppression scope, the namespace of lane names. So that an unsubscribe
// from a list can never block another lane's mail (a password reset), a
// list may not be named "all" (the scope of every lane) nor after any of
// otherLanes, the names of the deployment's other lanes: such an enqueue is
// refused.
func Lane(list *suppress.List, lane string, p suppress.Policy, s *Signer, links Links, otherLanes ...string) (*queue.Screen, error) {
	if err := links.Check(); err != nil {
		return nil, err
	}
	taken := map[string]bool{suppress.ScopeAll: true}
	for _, o := range otherLanes {
		if o != lane {
			taken[o] = true
		}
	}
	prepare := func(m *transport.Message, name string) (*transport.Message, string, error) {
		if name == "" {
			name = lane
		}
		if taken[name] {
			what := "the name of lane " + name
			if name == suppress.ScopeAll {
				what = "the suppression scope of every lane"
			}
			return nil, "", &queue.InvalidError{Reason: "list " + name + " is " + what + ": its unsubscribes would block that mail too; name the list otherwise"}
		}
		for _, h := range m.Headers {
			for _, own := range []string{HeaderUnsubscribe, HeaderUnsubscribePost, HeaderListID} {
				if strings.EqualFold(h.Name, own) {
					return nil, "", &queue.InvalidError{Reason: "header " + h.Name + ": lane " + lane + " is a bulk lane and sets it itself"}
				}
			}
		}
		rcpt, err := suppress.Normalize(m.To.Address)
		if err != nil {
			return nil, "", &queue.InvalidError{Reason: err.Error()}
		}
		tok, err := s.Token(Claim{List: name, MailID: MailID(m.MessageID), Recipient: rcpt})
		if err != nil {
			return nil, "", err
		}
		value := "<" + links.URL + tok + ">"
		if links.Mailto != "" {
			value += ", <mailto:" + links.Mailto + "?subject=unsubscribe%20" + tok + ">"
		}
		c := *m
		c.Headers = append(append([]transport.Header(nil), m.Headers...),
			transport.Header{Name: HeaderUnsubscribe, Value: value},
			transport.Header{Name: HeaderUnsubscribePost, Value: "List-Unsubscribe=One-Click"})
		if _, domain, ok := strings.Cut(m.From.Address, "@"); ok {
			c.Headers = append(c.Headers, transport.Header{Name: HeaderListID, Value: "<" + name + "." + domain + ">"})
		}
		if err := c.Validate(); err != nil {
			return nil, "", err
		}
		return &c, name, nil
	}
	return list.BulkScreen(lane, p, suppress.Lists{PrepareFunc: prepare, ListOfFunc: s.ListOf}), nil
}

// ListOf returns the list a stored mail belongs to, from the
// List-Unsubscribe header Lane added; "" when it has none.
func (s *Signer) ListOf(m *transport.Message) string {
	for _, h := range m.Headers {
		if !strings.EqualFold(h.Name, HeaderUnsubscribe) {
			continue
		}
		_, rest, ok := strings.Cut(h.Value, "/u/")
		if !ok {
			return ""
		}
		tok, _, _ := strings.Cut(rest, ">")
		return s.listOf(tok)
	}
	return ""
}
