import Client from './client.js';

export default function Page() {
  return <Client />;
}
