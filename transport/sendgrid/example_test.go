package sendgrid_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/mail"

	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/sendgrid"
)

// A program registers the adapter in its Mux and opens it from the
// configured URL. Here a local server stands in for api.sendgrid.com; in
// production the URL is "sendgrid://default" and the key comes from
// SENDGRID_API_KEY.
func ExampleURLOpener() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Message-Id", "14c5d75ce93.dfd.64b469")
		w.WriteHeader(http.StatusAccepted)
	}))
	defer api.Close()

	var mux transport.Mux
	mux.Register(sendgrid.Scheme, sendgrid.URLOpener{})

	ctx := context.Background()
	tr, err := mux.OpenTransport(ctx, "sendgrid://apikey:SG.example-key@default?timeout=10s&endpoint="+api.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()

	receipt, err := tr.Send(ctx, &transport.Message{
		From:    mail.Address{Name: "Shop", Address: "shop@example.com"},
		To:      mail.Address{Address: "ana@example.net"},
		Subject: "Your order has shipped",
		Text:    "It is on its way.",
	})
	fmt.Println(transport.KindOf(err), receipt.MessageID)
	// Output: sent 14c5d75ce93.dfd.64b469
}
