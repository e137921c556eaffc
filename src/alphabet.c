/* alphabet.c - the 29-symbol character set, labels to text and back; see
 * alphabet.h. */
#include "alphabet.h"

const char ds_alphabet[DS_ALPHABET_SIZE + 1] = "_'ABCDEFGHIJKLMNOPQRSTUVWXYZ ";

int ds_alphabet_index(char ch)
{
    if (ch >= 'a' && ch <= 'z')
        ch = (char)(ch - 'a' + 'A');
    if (ch >= 'A' && ch <= 'Z')
        return 2 + (ch - 'A');
    switch (ch) {
    case '_': return 0;
    case '\'': return 1;
    case ' ': return 28;
    default: return -1;
    }
}

void ds_alphabet_labels_to_text(const int *labels, int n, char *out)
{
    for (int k = 0; k < n; k++)
        out[k] = labels[k] >= 0 && labels[k] < DS_ALPHABET_SIZE ? ds_alphabet[labels[k]] : '?';
    out[n > 0 ? n : 0] = '\0';
}

int ds_alphabet_text_to_labels(const char *text, int *out, int cap)
{
    int n = 0;
    for (; text[n]; n++) {
        int id = ds_alphabet_index(text[n]);
        if (id < 0 || n >= cap)
            return -1;
        out[n] = id;
    }
    return n;
}
