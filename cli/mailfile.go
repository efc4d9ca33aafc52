package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// maxFileMails is the most mails one enqueue --file takes: they are queued
// in one transaction, and held in memory until then.
const maxFileMails = 1000

// fileBounds are the sizes an enqueue --file may not exceed, from the
// lane's per-mail size limit: one mail's JSON may take six bytes per byte
// of content (every byte escaped as \u00XX) plus its fields, and the whole
// file the per-mail limit times maxFileMails, at most maxFileBytes.
type fileBounds struct {
	perMail, total int64
}

func boundsFor(maxSize int) fileBounds {
	total := min(int64(maxSize)*maxFileMails, maxFileBytes)
	return fileBounds{perMail: min(6*int64(maxSize)+64<<10, total), total: total}
}

// maxFileBytes caps a whole file whatever the lane's size limit (a lane
// on SMTP may take 64 MiB mails; a thousand of them is not one file).
const maxFileBytes = 1 << 30

// errTooBig is what boundedReader returns once a bound is passed.
type errTooBig struct{ msg string }

func (e errTooBig) Error() string { return e.msg }

// boundedReader reads at most b.total bytes, and at most b.perMail past
// mark (the offset the mail being decoded starts at): a stream that never
// ends (/dev/zero) or a value that never closes fails at the bound instead
// of growing until the kernel kills the process.
type boundedReader struct {
	r    io.Reader
	b    fileBounds
	n    int64 // bytes read so far
	mark int64
	mail int // the mail being read, from 1
}

func (r *boundedReader) Read(p []byte) (int, error) {
	if r.n >= r.b.total {
		return 0, errTooBig{fmt.Sprintf("larger than %d bytes (at most %d mails of at most %d bytes each in one file): split it", r.b.total, maxFileMails, r.b.total/maxFileMails)}
	}
	if r.n-r.mark >= r.b.perMail {
		return 0, errTooBig{fmt.Sprintf("mail %d is larger than %d bytes of JSON", r.mail, r.b.perMail)}
	}
	limit := min(r.b.total-r.n, r.b.perMail-(r.n-r.mark))
	if int64(len(p)) > limit {
		p = p[:limit]
	}
	n, err := r.r.Read(p)
	r.n += int64(n)
	return n, err
}

// readSpecs reads one mail object or an array of them, strictly (see
// checkJSON), one mail at a time within the bounds: the first thing that
// cannot be a mail file (a NUL, a byte that is not JSON) ends the read.
func readSpecs(path string, stdin io.Reader, b fileBounds) ([]mailSpec, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	specs, err := decodeSpecs(r, b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return specs, nil
}

func decodeSpecs(r io.Reader, b fileBounds) ([]mailSpec, error) {
	br := &boundedReader{r: r, b: b, mail: 1}
	buf := bufio.NewReader(br)
	first, err := firstByte(buf)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(buf)
	one := func() (mailSpec, error) {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return mailSpec{}, err
		}
		return strictSpec(raw)
	}
	var specs []mailSpec
	if first != '[' {
		s, err := one()
		if err != nil {
			return nil, err
		}
		specs = append(specs, s)
	} else {
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		for dec.More() {
			if len(specs) == maxFileMails {
				return nil, fmt.Errorf("more than %d mails: split the file", maxFileMails)
			}
			br.mark, br.mail = dec.InputOffset(), len(specs)+1
			s, err := one()
			if err != nil {
				return nil, fmt.Errorf("mail %d: %w", len(specs)+1, err)
			}
			specs = append(specs, s)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		if len(specs) == 0 {
			return nil, errors.New("an empty array")
		}
	}
	br.mark = dec.InputOffset()
	if _, err := dec.Token(); err != io.EOF {
		var tooBig errTooBig
		if errors.As(err, &tooBig) {
			return nil, err
		}
		return nil, fmt.Errorf("unexpected data after the JSON value at byte %d", dec.InputOffset())
	}
	return specs, nil
}

// firstByte returns the first byte that is not JSON white space, unread.
func firstByte(r *bufio.Reader) (byte, error) {
	for {
		c, err := r.ReadByte()
		if err == io.EOF {
			return 0, errors.New("empty: no JSON value")
		}
		if err != nil {
			return 0, err
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c, r.UnreadByte()
	}
}

// strictSpec decodes one mail object after checkJSON's checks.
func strictSpec(raw []byte) (mailSpec, error) {
	if err := checkJSON(raw); err != nil {
		return mailSpec{}, err
	}
	var s mailSpec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return mailSpec{}, err
	}
	return s, nil
}
