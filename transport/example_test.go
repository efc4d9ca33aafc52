package transport_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/mailspool/mailspool/transport"
)

func ExampleKindOf() {
	// What an adapter returns for "550 5.1.1 no such user", wrapped by a caller.
	err := fmt.Errorf("sending mail 42: %w", &transport.Error{
		Kind: transport.Permanent, Code: 550, Enhanced: "5.1.1", Detail: "no such user",
	})
	fmt.Println(transport.KindOf(err))
	fmt.Println(transport.KindOf(nil))
	fmt.Println(transport.KindOf(errors.New("something nobody classified")))

	var te *transport.Error
	if errors.As(err, &te) {
		fmt.Println(te.Code, te.Enhanced)
	}
	// Output:
	// permanent
	// sent
	// temporary
	// 550 5.1.1
}

// logOpener stands in for an adapter package's URLOpener.
type logOpener struct{}

func (logOpener) OpenTransportURL(ctx context.Context, u *url.URL) (transport.Transport, error) {
	if err := transport.CheckQuery(u, "timeout"); err != nil {
		return nil, err
	}
	return logTransport{}, nil
}

type logTransport struct{}

func (logTransport) Send(ctx context.Context, m *transport.Message) (transport.Receipt, error) {
	return transport.Receipt{MessageID: m.MessageID}, nil
}
func (logTransport) Close() error { return nil }

func ExampleMux() {
	var mux transport.Mux
	mux.Register("log", logOpener{}) // real programs register smtp.URLOpener{}, ses.URLOpener{}, ...

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	tr, err := mux.OpenTransport(ctx, "log://?timeout=5s")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()
	fmt.Println(mux.Schemes())

	_, err = mux.OpenTransport(ctx, "smtp://user:secret@mail.example.com:587")
	fmt.Println(err)
	_, err = mux.OpenTransport(ctx, "log://?timeuot=5s")
	fmt.Println(err)
	// Output:
	// [log]
	// transport: unknown transport scheme "smtp" in "smtp://user:xxxxx@mail.example.com:587" (registered: log)
	// transport: unknown parameter "timeuot" in log URL "log://?timeuot=5s" (known: timeout)
}
