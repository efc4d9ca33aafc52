package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/mailspool/mailspool/mailaddr"
)

// jsonKeys are the keys a mail file may use, exactly as written (the json
// names of mailSpec and headerSpec), by their case folding.
var jsonKeys = func() map[string]string {
	keys := map[string]string{}
	for _, t := range []reflect.Type{reflect.TypeFor[mailSpec](), reflect.TypeFor[headerSpec]()} {
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			keys[mailaddr.Fold(name)] = name
		}
	}
	return keys
}()

// checkJSON refuses what encoding/json lets through but a mail file must
// not contain: invalid UTF-8 and lone UTF-16 surrogates (both would become
// U+FFFD, even inside an address), a key given twice in one object, also
// when the two differ only in case (the last would win), a key that
// matches a field only without case ("TO", "ſubject" with U+017F), and
// anything after the value. Case is compared the way encoding/json matches
// keys to fields (bytes.EqualFold: Unicode simple case folding, so the long
// s matches s and the Kelvin sign matches k).
func checkJSON(data []byte) error {
	if !utf8.Valid(data) {
		return errors.New("not valid UTF-8")
	}
	if err := loneSurrogate(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := checkValue(dec); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("unexpected data after the JSON value at byte %d", dec.InputOffset())
	}
	return nil
}

// checkValue reads one value from dec, checking the keys of its objects.
func checkValue(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('['):
		for dec.More() {
			if err := checkValue(dec); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('{'):
		seen := map[string]string{}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return err
			}
			key := t.(string)
			folded := mailaddr.Fold(key)
			if first, dup := seen[folded]; dup {
				return fmt.Errorf("key %q given twice in one object (as %q and %q)", folded, first, key)
			}
			seen[folded] = key
			if known, ok := jsonKeys[folded]; ok && known != key {
				return fmt.Errorf("key %q: keys are written exactly as %q", key, known)
			}
			if err := checkValue(dec); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}

// loneSurrogate finds a \u escape of a UTF-16 surrogate that is not part
// of a pair.
func loneSurrogate(data []byte) error {
	for i := 0; i+6 <= len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		if data[i+1] != 'u' {
			i++ // skip the escaped character (it may be a backslash)
			continue
		}
		r, ok := hex4(data[i+2 : i+6])
		switch {
		case !ok || r < 0xD800 || r > 0xDFFF:
		case r <= 0xDBFF && i+12 <= len(data) && data[i+6] == '\\' && data[i+7] == 'u':
			if lo, ok := hex4(data[i+8 : i+12]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				i += 6 // the pair's low half
				break
			}
			return fmt.Errorf("lone UTF-16 surrogate \\u%04X at byte %d", r, i)
		default:
			return fmt.Errorf("lone UTF-16 surrogate \\u%04X at byte %d", r, i)
		}
		i += 5
	}
	return nil
}

func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
