package fake_test

import (
	"context"
	"errors"
	"fmt"
	"net/mail"

	"github.com/mailspool/mailspool/transport"
	"github.com/mailspool/mailspool/transport/fake"
)

func welcome(to string) *transport.Message {
	return &transport.Message{
		MessageID: "welcome-" + to,
		From:      mail.Address{Name: "Shop", Address: "shop@example.com"},
		To:        mail.Address{Address: to},
		Subject:   "Welcome",
		Text:      "Welcome aboard.\n",
	}
}

// A script plays recorded replies in order; the last one repeats.
func ExampleNew() {
	tr := fake.New(&fake.Options{Script: []string{"ok", "421", "550"}})
	defer tr.Close()

	for _, to := range []string{"ann@example.net", "bob@example.net", "cyd@example.net", "dee@example.net"} {
		_, err := tr.Send(context.Background(), welcome(to))
		var te *transport.Error
		if errors.As(err, &te) {
			fmt.Println(to, te.Kind, te.Code, te.Enhanced)
		} else {
			fmt.Println(to, transport.KindOf(err))
		}
	}
	for _, m := range tr.Sent() {
		fmt.Println("sent:", m.MessageID)
	}
	fmt.Println("attempts:", tr.Attempts())
	// Output:
	// ann@example.net sent
	// bob@example.net temporary 421 4.7.0
	// cyd@example.net permanent 550 5.1.1
	// dee@example.net permanent 550 5.1.1
	// sent: welcome-ann@example.net
	// attempts: 4
}

// With recipient=true the recipient's plus tag picks the step, so one
// transport serves a whole test or demo deterministically.
func ExampleURLOpener() {
	var mux transport.Mux
	mux.Register(fake.Scheme, fake.URLOpener{})
	tr, err := mux.OpenTransport(context.Background(), "fake://?recipient=true&timeout=10ms")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()

	for _, to := range []string{"ann@example.net", "bob+550@example.net", "cyd+timeout@example.net", "dee+http-429@example.net"} {
		_, err := tr.Send(context.Background(), welcome(to))
		fmt.Printf("%-26s %s\n", to, transport.KindOf(err))
	}
	fmt.Println("sent:", len(tr.(*fake.Transport).Sent()))
	// Output:
	// ann@example.net            sent
	// bob+550@example.net        permanent
	// cyd+timeout@example.net    connection
	// dee+http-429@example.net   temporary
	// sent: 1
}
