package cost

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/relaygate/gateway/config"
)

// MaxCatalogFileSize bounds a catalog file. Public catalogs of every
// provider's models are a few megabytes.
const MaxCatalogFileSize = 32 << 20

// Load reads and merges the sources of config.modelCatalog in order, later
// sources winning, and compiles the result. A relative file path is taken
// from baseDir (the configuration file's directory; "" is the working
// directory). Every problem is reported, each naming its source by index
// and, for a file's content, the field and line:
//
//	config.modelCatalog[1].file (prices.yaml): providers.openai.models.gpt-4o.rates.input: must not be negative, got "-1" (line 5:16)
//
// A file that cannot be read is an error: the catalog is read when the
// configuration is applied, so a missing file is refused with it rather
// than leaving its models unpriced.
func Load(sources []config.ModelCatalogSource, baseDir string) (*Catalog, error) {
	var merged config.ModelCatalog
	var errs []error
	for i, src := range sources {
		at := "config.modelCatalog[" + strconv.Itoa(i) + "]"
		switch {
		case src.Inline != nil:
			merge(&merged, src.Inline)
		case src.File != "":
			c, err := loadFile(at, src.File, baseDir)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			merge(&merged, c)
		default:
			errs = append(errs, errors.New(at+": neither file nor inline is set"))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return compile(&merged), nil
}

// loadFile reads and parses one catalog file, bounded by MaxCatalogFileSize.
func loadFile(at, path, baseDir string) (*config.ModelCatalog, error) {
	full := path
	if !filepath.IsAbs(path) && baseDir != "" {
		full = filepath.Join(baseDir, path)
	}
	at += ".file (" + path + ")"
	data, err := readBounded(full)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	var c config.ModelCatalog
	if fieldErrs := config.ParseModelCatalog(data, &c); len(fieldErrs) > 0 {
		errs := make([]error, len(fieldErrs))
		for i, e := range fieldErrs {
			errs[i] = fmt.Errorf("%s: %w", at, e)
		}
		return nil, errors.Join(errs...)
	}
	return &c, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, config.FileError(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxCatalogFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxCatalogFileSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxCatalogFileSize)
	}
	return data, nil
}

// merge lays over onto base, model by model: a rate over sets replaces
// base's, and over's tiers, when it has any, replace base's. So a later
// source can change one price of a model without restating the others.
// Tags play no part in prices and are not kept.
func merge(base, over *config.ModelCatalog) {
	for pname, op := range over.Providers {
		if base.Providers == nil {
			base.Providers = map[string]config.CatalogProvider{}
		}
		bp := base.Providers[pname]
		if bp.Models == nil {
			bp.Models = map[string]config.CatalogModel{}
		}
		for mname, om := range op.Models {
			bm, ok := bp.Models[mname]
			if !ok {
				bp.Models[mname] = om
				continue
			}
			bm.Rates = overlay(bm.Rates, om.Rates)
			if len(om.Tiers) > 0 {
				bm.Tiers = om.Tiers
			}
			bp.Models[mname] = bm
		}
		base.Providers[pname] = bp
	}
}

// overlay returns base with every rate over sets replaced.
func overlay(base, over config.CatalogRates) config.CatalogRates {
	b, o := rateList(&base), rateList(&over)
	for k := range b {
		if o[k] != nil {
			b[k] = o[k]
		}
	}
	return config.CatalogRates{
		Input: b[kindInput], Output: b[kindOutput],
		CacheRead: b[kindCacheRead], CacheWrite: b[kindCacheWrite],
		Reasoning:  b[kindReasoning],
		InputAudio: b[kindInputAudio], OutputAudio: b[kindOutputAudio],
	}
}

// compile builds the lookup table of a merged catalog.
func compile(c *config.ModelCatalog) *Catalog {
	out := &Catalog{models: map[modelKey]*model{}}
	for pname, p := range c.Providers {
		for mname, m := range p.Models {
			out.models[modelKey{pname, mname}] = compileModel(&m)
		}
	}
	return out
}
