/* alphabet.h - the 29-symbol character set of deepspeech.pytorch's English
 * models: index 0 is the CTC blank '_', 1 the apostrophe, 2..27 'A'..'Z' and
 * 28 the space. Transcripts are upper case; lower-case input is folded. */
#ifndef DS_ALPHABET_H
#define DS_ALPHABET_H

#define DS_ALPHABET_SIZE 29
#define DS_BLANK 0

/* The symbols in index order: "_'ABCDEFGHIJKLMNOPQRSTUVWXYZ " (plus NUL). */
extern const char ds_alphabet[DS_ALPHABET_SIZE + 1];

/* Index of ch, lower case folded to upper; -1 when ch is not a symbol. The
 * blank '_' is a symbol like any other here: callers wanting transcript
 * characters only should treat DS_BLANK as absent. */
int ds_alphabet_index(char ch);

/* Writes the symbols of labels [n] into out [n+1], NUL-terminated. Indices
 * outside the alphabet are written as '?'. */
void ds_alphabet_labels_to_text(const int *labels, int n, char *out);

/* Converts text to indices in out [cap]; returns the count, or -1 when a
 * character is not in the alphabet or the text holds more than cap. */
int ds_alphabet_text_to_labels(const char *text, int *out, int cap);

#endif
