package sock

// SentCount is sentCount.
var SentCount = sentCount
