package main

import (
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/relaygate/gateway/config"
)

// newLoggers builds the process logger and the access logger from
// config.logging: `level` ("info", or per module: "info,access=warn") and
// `format` (text or json). The module "access" controls the access log.
func newLoggers(f *config.File, out io.Writer) (*zap.Logger, *zap.Logger, error) {
	level, accessLevel, format := "info", "", "text"
	if f.Config != nil && f.Config.Logging != nil {
		lg := f.Config.Logging
		if lg.Format != "" {
			format = lg.Format
		}
		if lg.Level != nil {
			if lg.Level.Default != "" {
				level = lg.Level.Default
			}
			accessLevel = lg.Level.Modules["access"]
		}
	}
	if accessLevel == "" {
		accessLevel = level
	}
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	if format == "json" {
		enc = zapcore.NewJSONEncoder(encCfg)
	} else {
		encCfg.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(encCfg)
	}
	sink := zapcore.Lock(zapcore.AddSync(out))
	mk := func(l string) *zap.Logger {
		return zap.New(zapcore.NewCore(enc, sink, zapLevel(l)))
	}
	return mk(level), mk(accessLevel).Named("access"), nil
}

func zapLevel(l string) zapcore.LevelEnabler {
	switch l {
	case "trace", "debug":
		return zapcore.DebugLevel
	case "warn":
		return zapcore.WarnLevel
	case "error":
		return zapcore.ErrorLevel
	case "off":
		return zapcore.FatalLevel + 1
	}
	return zapcore.InfoLevel
}
