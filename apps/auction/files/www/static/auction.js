// The home page's script: lists the running auctions and follows the
// current item of one with the same long poll the simulated users use.
async function json(url, opts) {
  const r = await fetch(url, opts);
  const b = await r.json();
  if (!r.ok) throw new Error(b.error || r.status);
  return b;
}
async function follow(auctionId) {
  let item = await json(`/auction/item/current/auction/${auctionId}`);
  let version = 0;
  for (;;) {
    const s = await json(`/auction/bid/auction/${auctionId}/item/${item.id}/count/${version}`);
    document.querySelector('#item .bid').textContent = `${s.state} ${s.amount ?? ''}`;
    version = s.version;
    if (s.state === 'SOLD' || s.state === 'NOTSOLD') {
      item = await json(`/auction/item/current/auction/${auctionId}`);
      version = 0;
    }
  }
}
document.querySelector('#login form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const f = new FormData(e.target);
  await json('/auction/login', {method: 'POST', headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({email: f.get('email'), password: f.get('password')})});
  const page = await json('/auction/live/auction?pageSize=5&page=0');
  const ul = document.querySelector('#auctions ul');
  ul.innerHTML = '';
  for (const a of page.items) {
    const li = document.createElement('li');
    li.textContent = a.name;
    li.onclick = () => follow(a.id);
    ul.appendChild(li);
  }
});
