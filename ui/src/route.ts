import { useEffect, useState } from 'react';

/**
 * The dashboard routes on the URL's hash (#/machines/m-1): the gateway serves one index.html at
 * /ui/, and a reload or a shared link lands on the same page without server-side routes.
 */
export function useRoute(): string[] {
  const read = () =>
    window.location.hash
      .replace(/^#\/?/, '')
      .split('/')
      .filter(Boolean)
      .map((part) => decodeURIComponent(part));
  const [parts, setParts] = useState(read);
  useEffect(() => {
    const onChange = () => setParts(read());
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return parts;
}

export const href = (...parts: string[]): string => `#/${parts.map(encodeURIComponent).join('/')}`;
