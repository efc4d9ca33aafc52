package ses_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/mail"

	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/ses"
)

// An "ses://" URL opened through a Mux. In production the URL is
// "ses://default?region=eu-west-1" and credentials come from the AWS chain;
// here static credentials and the endpoint point at a local stand-in for
// SES.
func ExampleURLOpener() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"MessageId":"010201900000000a-example-000000"}`)
	}))
	defer srv.Close()

	var mux transport.Mux
	mux.Register(ses.Scheme, ses.URLOpener{})
	tr, err := mux.OpenTransport(context.Background(),
		"ses://AKIAEXAMPLE:example-secret@default?region=eu-west-1&configuration_set=transactional&endpoint="+srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()

	rc, err := tr.Send(context.Background(), &transport.Message{
		From:    mail.Address{Name: "Shop", Address: "shop@example.com"},
		To:      mail.Address{Address: "customer@example.net"},
		Subject: "Your order",
		Text:    "It ships today.",
	})
	fmt.Println(rc.MessageID, transport.KindOf(err))
	// Output: 010201900000000a-example-000000 sent
}
