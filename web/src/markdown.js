// Markdown from agents, drawn safely: raw HTML in the source is shown as
// text (never parsed), the rendered HTML passes DOMPurify with a short
// allow-list, and links may only be http(s), mailto or relative.

import { Marked } from 'marked';
import DOMPurify from 'dompurify';

const escapeHTML = (s) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    // Raw HTML blocks and inline tags are text, not markup.
    html(token) {
      return escapeHTML(token.text ?? token.raw ?? '');
    },
    // Remote images would tell a third party the page was read: show the
    // alt text instead.
    image(token) {
      return escapeHTML(`[${token.text || 'image'}]`);
    },
  },
});

const SAFE_URL = /^(?:https?:|mailto:|#|\/(?!\/)|\.{0,2}\/|[^:/?#]+(?:[/?#]|$))/i;

const purify = DOMPurify();
purify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    const href = node.getAttribute('href') || '';
    if (!SAFE_URL.test(href)) node.removeAttribute('href');
    node.setAttribute('rel', 'noopener noreferrer nofollow');
    node.setAttribute('target', '_blank');
  }
});

const CONFIG = {
  ALLOWED_TAGS: ['p', 'br', 'hr', 'em', 'strong', 'del', 'code', 'pre', 'blockquote', 'ul', 'ol', 'li',
    'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'a', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'input', 'span'],
  ALLOWED_ATTR: ['href', 'title', 'align', 'type', 'checked', 'disabled', 'start'],
  ALLOWED_URI_REGEXP: SAFE_URL,
  RETURN_DOM_FRAGMENT: true,
};

/** renderMarkdown returns a sanitized DocumentFragment for the source. */
export function renderMarkdown(src) {
  const html = marked.parse(String(src ?? ''), { async: false });
  return purify.sanitize(html, CONFIG);
}
