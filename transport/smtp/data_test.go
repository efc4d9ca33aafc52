package smtp

import (
	"bufio"
	"bytes"
	"net/textproto"
	"testing"
)

// dotWriterBytes is what net/textproto's DotWriter writes for chunks.
func dotWriterBytes(t *testing.T, chunks [][]byte) []byte {
	var out bytes.Buffer
	w := textproto.NewWriter(bufio.NewWriter(&out)).DotWriter()
	for _, c := range chunks {
		if _, err := w.Write(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// dataWriterBytes is what a dataWriter writes for chunks.
func dataWriterBytes(t *testing.T, chunks [][]byte) []byte {
	var out bytes.Buffer
	w := &dataWriter{w: bufio.NewWriter(&out)}
	for _, c := range chunks {
		n, err := w.Write(c)
		if err != nil {
			t.Fatal(err)
		}
		if n != len(c) {
			t.Fatalf("Write(%q) = %d, want %d", c, n, len(c))
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// split cuts b at the offsets in cuts (each taken modulo what is left).
func split(b []byte, cuts []byte) [][]byte {
	var chunks [][]byte
	for _, c := range cuts {
		if len(b) == 0 {
			break
		}
		k := int(c) % (len(b) + 1)
		chunks = append(chunks, b[:k])
		b = b[k:]
	}
	return append(chunks, b)
}

func TestDataWriter(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "\r\n.\r\n"},
		{"Subject: x\r\n\r\nbody\r\n", "Subject: x\r\n\r\nbody\r\n.\r\n"},
		{".leading\r\n..two\r\nmid.dle\r\n.", "..leading\r\n...two\r\nmid.dle\r\n..\r\n.\r\n"},
		{"bare\nlf\n.dot", "bare\r\nlf\r\n..dot\r\n.\r\n"},
		{"bare\rcr", "bare\rcr\r\n.\r\n"},
		{"ends in cr\r", "ends in cr\r\n.\r\n"},
		{"\r\r\n", "\r\r\r\n.\r\n"},
		{"\r\n.\r\n", "\r\n..\r\n.\r\n"}, // no early terminator: no smuggling
	} {
		for _, cuts := range [][]byte{nil, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {3, 2}} {
			chunks := split([]byte(tc.in), cuts)
			if got := dataWriterBytes(t, chunks); string(got) != tc.want {
				t.Errorf("dataWriter(%q in %d chunks) = %q, want %q", tc.in, len(chunks), got, tc.want)
			}
			if got := dotWriterBytes(t, chunks); string(got) != tc.want {
				t.Errorf("textproto's DotWriter(%q) = %q: the table is wrong", tc.in, got)
			}
		}
	}
}

// FuzzDataWriter: for any bytes, cut into any chunks, a dataWriter writes
// what net/textproto's DotWriter writes.
func FuzzDataWriter(f *testing.F) {
	f.Add([]byte("Subject: x\r\n\r\n.body\r\n"), []byte{5, 9})
	f.Add([]byte("a\nb\rc\r\r\n.\n."), []byte{1, 1, 1, 1, 1})
	f.Add([]byte("\r"), []byte{})
	f.Fuzz(func(t *testing.T, in, cuts []byte) {
		chunks := split(in, cuts)
		want := dotWriterBytes(t, chunks)
		if got := dataWriterBytes(t, chunks); !bytes.Equal(got, want) {
			t.Fatalf("input %q in chunks %q:\n got %q\nwant %q", in, chunks, got, want)
		}
	})
}
