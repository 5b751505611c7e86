package tokens

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// prompt4KB is a 4 KiB chat prompt: instructions, prose with numbers, a list
// and a code fragment.
func prompt4KB() []byte {
	return repeatTo4KB("You are a helpful assistant for an online store. Answer in a friendly, concise tone.\n" +
		"Customer question: my order #48213 arrived on March 14 with 2 of the 5 items missing; " +
		"the invoice says $129.99 was charged. What are my options?\n" +
		"- Check the shipping policy (section 4.2) before answering.\n" +
		"- If a refund applies, explain the steps.\n" +
		"```go\nfunc refund(order int, amount float64) error { return nil }\n```\n")
}

// corpus returns testdata/<name>.txt: about 4 KB of text that, unlike
// prompt4KB, does not repeat itself, so that benchmarks meet as many
// distinct words as real prompts do. prose is a support-chat prompt, code a
// code-review prompt in Go and Python, cjk the prose prompt's kind in
// Chinese, Japanese and a little Korean.
func corpus(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".txt"))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

var corpora = []string{"prose", "code", "cjk"}

// repeatTo4KB repeats para up to 4096 bytes.
func repeatTo4KB(para string) []byte {
	var b bytes.Buffer
	for b.Len() < 4096 {
		b.WriteString(para)
	}
	return b.Bytes()[:4096]
}
