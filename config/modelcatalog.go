package config

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/relaygate/gateway/config/decode"
)

// CatalogSources is `config.modelCatalog`: model price catalogs, merged in
// order, later entries winning (backend/llm/cost Load).
type CatalogSources []ModelCatalogSource

// ModelCatalogSource is one entry of `config.modelCatalog`. A source is
// `{file: path}`, read when the configuration is compiled (backend/llm/cost
// Load), or `{inline: ...}`, the catalog itself as structured data or as a
// YAML or JSON string; both inline forms are parsed and checked with the
// rest of the file, and an error in a string names the field inside it.
type ModelCatalogSource struct {
	File   string        // a catalog file (YAML or JSON); "" for an inline source
	Inline *ModelCatalog // the inline catalog, whichever form it was written in
}

// DecodeNode decodes the file-or-inline union.
func (s *ModelCatalogSource) DecodeNode(n *decode.Node) {
	key, v := oneKey(n, "file", "inline")
	switch key {
	case "file":
		path, ok := v.String()
		if !ok {
			v.Errorf("expected a file path, got %s", v.Describe())
			return
		}
		if path == "" {
			v.Errorf("must not be empty (an environment variable that expanded to nothing?)")
			return
		}
		s.File = path
	case "inline":
		var c ModelCatalog
		if text, ok := v.String(); ok {
			if !decodeInlineCatalog(v, text, &c) {
				return
			}
		} else if v.Kind() != decode.Map {
			v.Errorf("expected a catalog as a map or as a YAML or JSON string, got %s", v.Describe())
			return
		} else if !v.Decode(&c) {
			return
		}
		s.Inline = &c
	}
}

// decodeInlineCatalog parses a catalog written as a string and records its
// errors at the paths they name inside it, below the string's own path,
// with the position inside the string.
func decodeInlineCatalog(v *decode.Node, text string, c *ModelCatalog) bool {
	errs := ParseModelCatalog([]byte(text), c)
	for _, e := range errs {
		msg := e.Msg
		if e.Line > 0 {
			msg += " (line " + strconv.Itoa(e.Line) + ":" + strconv.Itoa(e.Col) + " of the inline catalog)"
		}
		v.ErrorfAt(e.Path, "%s", msg)
	}
	return len(errs) == 0
}

// ParseModelCatalog decodes a catalog document (YAML or JSON) strictly
// into c. Error paths are relative to the document: "providers.openai...".
func ParseModelCatalog(data []byte, c *ModelCatalog) decode.Errors {
	return decode.YAML(data, c)
}

// MarshalJSON writes {"file": path} or {"inline": catalog}; an inline
// string is dumped in its structured form.
func (s ModelCatalogSource) MarshalJSON() ([]byte, error) {
	if s.Inline != nil {
		return json.Marshal(map[string]*ModelCatalog{"inline": s.Inline})
	}
	return jsonObject("file", s.File), nil
}

// ModelCatalog is agentgateway's Catalog: prices by provider and model.
// Provider names are the GenAI provider names ("openai", "anthropic",
// "gcp.gemini", "aws.bedrock", ...); model names are the providers' own.
type ModelCatalog struct {
	Providers map[string]CatalogProvider `json:"providers,omitempty"`
}

// CatalogProvider is one provider's models.
type CatalogProvider struct {
	Models map[string]CatalogModel `json:"models,omitempty"`
}

// CatalogModel is one model's prices: base rates, and tiers that replace
// some of them for requests whose input context is longer than a bound.
type CatalogModel struct {
	Rates CatalogRates  `json:"rates,omitzero"`
	Tiers []CatalogTier `json:"tiers,omitempty"`
	// Tags are free-form capability or routing tags; prices ignore them.
	Tags []string `json:"tags,omitempty"`
}

// FieldRules marks Validate's rules as each about one tier or tag.
func (CatalogModel) FieldRules() {}

// Validate requires tier bounds in strictly increasing order (a request
// takes the last tier whose bound its context exceeds) and distinct tags.
func (m CatalogModel) Validate(v *decode.Validation) {
	for i := 1; i < len(m.Tiers); i++ {
		if prev := m.Tiers[i-1].ContextOver; m.Tiers[i].ContextOver <= prev {
			v.Errorf(indexPath("tiers", i)+".contextOver", "must be greater than the previous tier's %d", prev)
		}
	}
	seen := make(map[string]int, len(m.Tags))
	for i, tag := range m.Tags {
		if first, dup := seen[tag]; dup {
			v.Errorf(indexPath("tags", i), "tag %q is already listed at tags[%d]", tag, first)
			continue
		}
		seen[tag] = i
	}
}

// CatalogTier holds the rates that apply, in place of the base rates they
// set, when a request's input context exceeds ContextOver tokens.
type CatalogTier struct {
	ContextOver uint64       `json:"contextOver" cfg:"required"`
	Rates       CatalogRates `json:"rates" cfg:"required"`
}

// CatalogRates are prices per million tokens; nil is unset. The fallbacks
// for unset rates are the cost package's (backend/llm/cost).
type CatalogRates struct {
	Input       *Money `json:"input,omitempty"`
	Output      *Money `json:"output,omitempty"`
	CacheRead   *Money `json:"cacheRead,omitempty"`
	CacheWrite  *Money `json:"cacheWrite,omitempty"`
	Reasoning   *Money `json:"reasoning,omitempty"`
	InputAudio  *Money `json:"inputAudio,omitempty"`
	OutputAudio *Money `json:"outputAudio,omitempty"`
}

// Money is a price written as a decimal string ("0.15"), as agentgateway's
// schema has it, so that no price goes through binary floating point: at
// most 6 fractional digits, not negative, at most MaxMoney. It is kept in
// millionths of the currency unit.
type Money struct {
	micros int64
}

// MaxMoney bounds a price, in currency units per million tokens. It keeps
// every cost computation within 128-bit integers.
const MaxMoney = 1_000_000_000

// moneyDigits is the most fractional digits a price may have.
const moneyDigits = 6

// MoneyFromMicros returns the price of micros millionths of a unit.
func MoneyFromMicros(micros int64) Money { return Money{micros} }

// Micros returns the price in millionths of the currency unit.
func (m Money) Micros() int64 { return m.micros }

// String writes the price as a decimal without trailing zeros: "0.15", "3".
func (m Money) String() string {
	whole, frac := m.micros/1e6, m.micros%1e6
	s := strconv.FormatInt(whole, 10)
	if frac == 0 {
		return s
	}
	f := strconv.FormatInt(frac+1e6, 10)[1:] // six digits, leading zeros kept
	return s + "." + strings.TrimRight(f, "0")
}

// DecodeNode parses the decimal string.
func (m *Money) DecodeNode(n *decode.Node) {
	s, ok := n.String()
	if !ok {
		if _, isNumber := n.Float(); isNumber {
			n.Errorf("expected a price as a decimal string such as \"0.15\" (quote it), got %s", n.Describe())
			return
		}
		n.Errorf("expected a price as a decimal string such as \"0.15\", got %s", n.Describe())
		return
	}
	micros, msg := parseMoney(s)
	if msg != "" {
		n.Errorf("%s", msg)
		return
	}
	m.micros = micros
}

// parseMoney parses digits[.digits] into millionths, or says what is wrong.
func parseMoney(s string) (int64, string) {
	if strings.HasPrefix(s, "-") {
		return 0, "must not be negative, got " + strconv.Quote(s)
	}
	whole, frac, hasPoint := strings.Cut(s, ".")
	if whole == "" || !allDigits(whole) || hasPoint && (frac == "" || !allDigits(frac)) {
		return 0, "invalid decimal " + strconv.Quote(s) + " (want digits with an optional fraction, such as \"0.15\")"
	}
	if len(frac) > moneyDigits {
		return 0, "more than 6 fractional digits: " + strconv.Quote(s)
	}
	whole = strings.TrimLeft(whole, "0")
	if len(whole) > len(strconv.Itoa(MaxMoney)) {
		return 0, "must be at most " + strconv.Itoa(MaxMoney) + ", got " + strconv.Quote(s)
	}
	w, _ := strconv.ParseInt("0"+whole, 10, 64) // at most 10 digits: fits
	if w > MaxMoney || w == MaxMoney && strings.Trim(frac, "0") != "" {
		return 0, "must be at most " + strconv.Itoa(MaxMoney) + ", got " + strconv.Quote(s)
	}
	f, _ := strconv.ParseInt(frac+strings.Repeat("0", moneyDigits-len(frac)), 10, 64)
	return w*1e6 + f, ""
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// MarshalJSON writes the decimal string.
func (m Money) MarshalJSON() ([]byte, error) { return jsonString(m.String()), nil }
