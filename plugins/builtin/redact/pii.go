package redact

import (
	"bytes"
	"strings"
)

// emailLocal marks the bytes of an address's local part that addresses
// really use (RFC 5322 allows more, which text rarely means as an address).
var emailLocal = charset(alnumChars + "._%+-")

// notEmailTLDs are the file extensions that follow `@` in names that are
// not addresses: `icon@2x.png`.
var notEmailTLDs = []string{"png", "jpg", "jpeg", "gif", "svg", "webp", "ico", "avif"}

// emailAt returns the address around the `@` at s[at], or end 0: a local
// part of up to 64 bytes, then a domain of at least two labels whose last
// (the TLD) is two or more letters.
func emailAt(s []byte, at int) (start, end int) {
	start = at
	for start > 0 && emailLocal[s[start-1]] && at-start < 64 {
		start--
	}
	if start > 0 && emailLocal[s[start-1]] {
		return 0, 0 // a local part longer than 64 bytes
	}
	for start < at && s[start] == '.' {
		start++
	}
	if start == at || s[at-1] == '.' {
		return 0, 0
	}
	labels, lastLabel := 0, 0
	for k := at + 1; ; {
		ls := k
		for k < len(s) && (alnum[s[k]] || s[k] == '-') {
			k++
		}
		if k == ls || s[ls] == '-' || s[k-1] == '-' {
			return 0, 0
		}
		labels++
		lastLabel, end = ls, k
		if k+1 < len(s) && s[k] == '.' && alnum[s[k+1]] {
			k++
			continue
		}
		break
	}
	tld := s[lastLabel:end]
	if labels < 2 || len(tld) < 2 || end-at > 254 {
		return 0, 0
	}
	for _, c := range tld {
		if !upper(c) && !lower(c) {
			return 0, 0
		}
	}
	for _, ext := range notEmailTLDs {
		if bytes.EqualFold(tld, []byte(ext)) {
			return 0, 0
		}
	}
	return start, end
}

// numberGroups is a number written in groups of digits: `+1 (415) 555-2671`,
// `4111 1111 1111 1111`.
type numberGroups struct {
	n     int     // groups read
	size  [8]int  // each group's digits
	first [8]byte // each group's first digit
	end   [8]int  // where each group ends in the text
	seps  [8]byte // the separator before each group (0: none)
	more  byte    // the separator after the last group read when digits follow it
}

// maxGroup bounds a group's digits: no number detected here has more.
const maxGroup = 19

// readGroups reads the groups of digits at s[pos:] into g: each maybe in
// parentheses (when parens), separated by one byte of seps (or by nothing
// after a closing parenthesis), 8 groups at most. It reports false when
// there is no first group.
func readGroups(s []byte, pos int, seps string, parens bool, g *numberGroups) bool {
	var sep byte
	for {
		p := pos
		paren := parens && p < len(s) && s[p] == '('
		if paren {
			p++
		}
		gs := p
		for p < len(s) && digit(s[p]) {
			p++
		}
		size := p - gs
		if paren {
			if p >= len(s) || s[p] != ')' {
				size = 0
			}
			p++
		}
		if size == 0 || size > maxGroup || g.n == len(g.size) {
			g.more = sep
			return g.n > 0
		}
		g.size[g.n], g.first[g.n], g.end[g.n], g.seps[g.n] = size, s[gs], p, sep
		g.n++
		next := p
		sep = 0
		if next < len(s) && strings.IndexByte(seps, s[next]) >= 0 {
			sep = s[next]
			next++
		} else if !paren {
			return true
		}
		if next >= len(s) || !digit(s[next]) && !(parens && s[next] == '(') {
			return true
		}
		pos = next
	}
}

// digits counts the digits of the first m groups.
func (g *numberGroups) digits(m int) int {
	d := 0
	for _, n := range g.size[:m] {
		d += n
	}
	return d
}

// endsAfter reports whether the number may be taken to end after its first
// m groups: at the end of what was read when nothing follows, else where a
// space (not a dash or dot, which continue a number) separates the next
// digits.
func (g *numberGroups) endsAfter(m int) bool {
	next := g.more
	if m < g.n {
		next = g.seps[m]
	}
	return m == g.n && next == 0 || next == ' '
}

// continuesNumber reports whether the word at s[i] continues a number
// before it (`12-415-555-2671`, `3.14`): a number starts after neither.
func continuesNumber(s []byte, i int) bool {
	if i < 2 || !digit(s[i-2]) {
		return false
	}
	switch s[i-1] {
	case ' ', '-', '.', '/', ',', ':':
		return true
	}
	return false
}

// phoneAt returns the phone number whose first digit group starts at the
// word s[i:], or end 0. Accepted: E.164 (`+` and 8 to 15 digits, in groups
// or not; also with `00` for the `+`), North American numbers in groups
// (`(415) 555-2671`, `415.555.2671`, `1-800-555-0199`) and numbers with a
// trunk prefix 0 in groups (`020 7946 0958`, `06 12 34 56 78`). A run of
// digits without `+` is not a phone number (ids, amounts, timestamps), nor
// are dates (2024-01-15), versions or addresses (192.168.1.1), which have
// other groupings.
func phoneAt(s []byte, i int) (start, end int) {
	start = i
	if i > 0 && (s[i-1] == '+' || s[i-1] == '(') {
		start = i - 1
		if start > 0 && alnum[s[start-1]] {
			return 0, 0
		}
	} else if continuesNumber(s, i) {
		return 0, 0
	}
	var g numberGroups
	plus := s[start] == '+'
	pos := start
	if plus {
		pos++
	}
	if !readGroups(s, pos, " -.", true, &g) {
		return 0, 0
	}
	intl := pos+1 < len(s) && s[pos] == '0' && s[pos+1] == '0'
	for m := g.n; m > 0; m-- {
		end = g.end[m-1]
		if g.endsAfter(m) && (end == len(s) || !alnum[s[end]]) && phoneShape(&g, m, plus, intl) {
			return start, end
		}
	}
	return 0, 0
}

// phoneShape reports whether the first m groups of g make a phone number;
// plus: it follows a `+`; intl: it starts with 00.
func phoneShape(g *numberGroups, m int, plus, intl bool) bool {
	d := g.digits(m)
	switch {
	case plus:
		return d >= 8 && d <= 15 && g.first[0] != '0'
	case g.first[0] == '0' && g.size[0] >= 2 && g.size[0] <= 5:
		if m < 2 || minSize(g, m) < 2 {
			return false
		}
		if intl { // 00 for the +: 0044 20 7946 0958
			return d-2 >= 8 && d-2 <= 15 && g.size[0] >= 3
		}
		return d >= 9 && d <= 12 // 0 as the trunk prefix
	case g.first[0] == '0':
		return false
	}
	k := 0
	if m == 4 && g.size[0] == 1 && g.first[0] == '1' {
		k = 1
	}
	return m-k == 3 && g.size[k] == 3 && g.size[k+1] == 3 && g.size[k+2] == 4 &&
		g.first[k] >= '2' && g.first[k+1] >= '2'
}

// minSize is the size of the smallest of the first m groups.
func minSize(g *numberGroups, m int) int {
	least := g.size[0]
	for _, n := range g.size[1:m] {
		least = min(least, n)
	}
	return least
}

// cardAt returns the end of the payment card number at the word s[i:], or
// 0: 13 to 19 digits, in one run or in groups split by spaces or dashes
// the way cards print them (fours, or Amex's 4-6-5), starting with a major
// network's digit (2 to 6) and passing the Luhn check.
func cardAt(s []byte, i int) int {
	if continuesNumber(s, i) || s[i] < '2' || s[i] > '6' {
		return 0
	}
	var g numberGroups
	if !readGroups(s, i, " -", false, &g) {
		return 0
	}
	for m := g.n; m > 0; m-- {
		end := g.end[m-1]
		if g.endsAfter(m) && (end == len(s) || !alnum[s[end]]) && cardShape(&g, m) && luhn(s[i:end]) {
			return end
		}
	}
	return 0
}

// cardShape reports whether the first m groups of g group 13 to 19 digits
// as cards print them, with one separator throughout.
func cardShape(g *numberGroups, m int) bool {
	if d := g.digits(m); d < 13 || d > 19 {
		return false
	}
	if m == 1 {
		return true
	}
	for k := 2; k < m; k++ {
		if g.seps[k] != g.seps[1] {
			return false
		}
	}
	if m == 3 && g.size[0] == 4 && g.size[1] == 6 && (g.size[2] == 5 || g.size[2] == 4) {
		return true // Amex, Diners
	}
	for k := range m - 1 {
		if g.size[k] != 4 {
			return false
		}
	}
	return m >= 3
}

// luhn reports whether the digits of number (separators skipped) pass the
// Luhn check and are not all one digit.
func luhn(number []byte) bool {
	sum, double, same := 0, false, true
	for k := len(number) - 1; k >= 0; k-- {
		c := number[k]
		if !digit(c) {
			continue
		}
		if c != number[0] {
			same = false
		}
		d := int(c - '0')
		if double {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0 && !same
}

// ibanLengths is the length of an IBAN by country (the ISO 13616 registry).
var ibanLengths = map[[2]byte]int{
	{'A', 'D'}: 24, {'A', 'E'}: 23, {'A', 'L'}: 28, {'A', 'T'}: 20, {'A', 'Z'}: 28, {'B', 'A'}: 20,
	{'B', 'E'}: 16, {'B', 'G'}: 22, {'B', 'H'}: 22, {'B', 'I'}: 27, {'B', 'R'}: 29, {'B', 'Y'}: 28,
	{'C', 'H'}: 21, {'C', 'R'}: 22, {'C', 'Y'}: 28, {'C', 'Z'}: 24, {'D', 'E'}: 22, {'D', 'J'}: 27,
	{'D', 'K'}: 18, {'D', 'O'}: 28, {'E', 'E'}: 20, {'E', 'G'}: 29, {'E', 'S'}: 24, {'F', 'I'}: 18,
	{'F', 'K'}: 18, {'F', 'O'}: 18, {'F', 'R'}: 27, {'G', 'B'}: 22, {'G', 'E'}: 22, {'G', 'I'}: 23,
	{'G', 'L'}: 18, {'G', 'R'}: 27, {'G', 'T'}: 28, {'H', 'N'}: 28, {'H', 'R'}: 21, {'H', 'U'}: 28,
	{'I', 'E'}: 22, {'I', 'L'}: 23, {'I', 'Q'}: 23, {'I', 'S'}: 26, {'I', 'T'}: 27, {'J', 'O'}: 30,
	{'K', 'W'}: 30, {'K', 'Z'}: 20, {'L', 'B'}: 28, {'L', 'C'}: 32, {'L', 'I'}: 21, {'L', 'T'}: 20,
	{'L', 'U'}: 20, {'L', 'V'}: 21, {'L', 'Y'}: 25, {'M', 'C'}: 27, {'M', 'D'}: 24, {'M', 'E'}: 22,
	{'M', 'K'}: 19, {'M', 'N'}: 20, {'M', 'R'}: 27, {'M', 'T'}: 31, {'M', 'U'}: 30, {'N', 'I'}: 28,
	{'N', 'L'}: 18, {'N', 'O'}: 15, {'O', 'M'}: 23, {'P', 'K'}: 24, {'P', 'L'}: 28, {'P', 'S'}: 29,
	{'P', 'T'}: 25, {'Q', 'A'}: 29, {'R', 'O'}: 24, {'R', 'S'}: 22, {'R', 'U'}: 33, {'S', 'A'}: 24,
	{'S', 'C'}: 31, {'S', 'D'}: 18, {'S', 'E'}: 24, {'S', 'I'}: 19, {'S', 'K'}: 24, {'S', 'M'}: 27,
	{'S', 'O'}: 23, {'S', 'T'}: 25, {'S', 'V'}: 28, {'T', 'L'}: 23, {'T', 'N'}: 24, {'U', 'A'}: 29,
	{'V', 'A'}: 22, {'V', 'G'}: 24, {'X', 'K'}: 20, {'Y', 'E'}: 30,
}

func ibanChar(c byte) bool { return upper(c) || digit(c) }

// ibanAt returns the end of the IBAN at the word s[i:], or 0: a country
// code, two check digits and the country's length of capitals and digits,
// compact or in groups of four split by spaces, whose mod-97 check holds.
func ibanAt(s []byte, i int) int {
	if i+4 > len(s) || !upper(s[i+1]) || !digit(s[i+2]) || !digit(s[i+3]) {
		return 0
	}
	want, ok := ibanLengths[[2]byte{s[i], s[i+1]}]
	if !ok {
		return 0
	}
	pos, count := i+4, 4
	if pos < len(s) && s[pos] == ' ' {
		for count < want {
			if pos >= len(s) || s[pos] != ' ' {
				return 0
			}
			gs := pos + 1
			for pos = gs; pos < len(s) && pos-gs < 4 && ibanChar(s[pos]); pos++ {
			}
			size := pos - gs
			if size == 0 || size < 4 && count+size != want || count+size > want {
				return 0
			}
			count += size
		}
	} else {
		for ; pos < len(s) && count < want && ibanChar(s[pos]); pos++ {
			count++
		}
	}
	if count != want || pos < len(s) && alnum[s[pos]] {
		return 0
	}
	if !mod97(s[i:pos]) {
		return 0
	}
	return pos
}

// mod97 reports whether the IBAN iban (spaces skipped) passes ISO 7064
// MOD 97-10: its first four characters moved to the end, letters read as
// 10 to 35, the number is 1 modulo 97.
func mod97(iban []byte) bool {
	r := 0
	add := func(c byte) {
		switch {
		case c == ' ':
		case digit(c):
			r = (r*10 + int(c-'0')) % 97
		default:
			r = (r*100 + int(c-'A'+10)) % 97
		}
	}
	for _, c := range iban[4:] {
		add(c)
	}
	for _, c := range iban[:4] {
		add(c)
	}
	return r == 1
}
