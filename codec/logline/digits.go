package logline

// digitPairs holds "00" to "99": numbers are written two digits a turn.
const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// appendInt appends v in decimal: what strconv.AppendInt(bs, v, 10)
// appends, without its paths for other bases.
func appendInt(bs []byte, v int64) []byte {
	u := uint64(v)
	if v < 0 {
		bs = append(bs, '-')
		u = -u // two's complement: right for math.MinInt64 too
	}
	if u < 10 {
		return append(bs, byte('0'+u))
	}
	var d [20]byte
	i := len(d)
	for u >= 100 {
		q := u / 100
		r := (u - q*100) * 2
		i -= 2
		d[i], d[i+1] = digitPairs[r], digitPairs[r+1]
		u = q
	}
	if u >= 10 {
		i -= 2
		d[i], d[i+1] = digitPairs[2*u], digitPairs[2*u+1]
	} else {
		i--
		d[i] = byte('0' + u)
	}
	return append(bs, d[i:]...)
}

// appendFraction appends a decimal point and the nine digits of nanos
// (0 < nanos < 1e9) without the zeros they end with: 87000 gives
// ".000087".
func appendFraction(bs []byte, nanos uint32) []byte {
	var d [10]byte
	d[0] = '.'
	u := nanos
	for i := 9; i > 1; i -= 2 {
		q := u / 100
		r := (u - q*100) * 2
		d[i-1], d[i] = digitPairs[r], digitPairs[r+1]
		u = q
	}
	d[1] = byte('0' + u)
	n := len(d)
	for d[n-1] == '0' {
		n--
	}
	return append(bs, d[:n]...)
}
