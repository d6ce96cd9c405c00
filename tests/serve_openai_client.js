// The official `openai` npm client against `specdec serve` (driven by tests/test_serve_openai.sh): completes, chats,
// streams both, passes the speculative object through, and reads an error. Prints one JSON object.
// usage: node serve_openai_client.js BASE_URL API_KEY PROMPT CHAT_USER
const OpenAI = require('openai');

async function main() {
    const [base, key, prompt, user] = process.argv.slice(2);
    const client = new OpenAI({ baseURL: base, apiKey: key, maxRetries: 0, timeout: 60000 });
    const out = {};
    const c = await client.completions.create({ model: 'm', prompt, max_tokens: 40, temperature: 0 });
    out.completion = c.choices[0].text;
    out.completion_finish = c.choices[0].finish_reason;
    const msgs = [{ role: 'user', content: user }];
    const ch = await client.chat.completions.create({ model: 'm', messages: msgs, max_tokens: 40, temperature: 0 });
    out.chat = ch.choices[0].message.content;
    let s = '';
    const cs = await client.completions.create({ model: 'm', prompt, max_tokens: 40, temperature: 0, stream: true });
    for await (const chunk of cs) s += chunk.choices[0]?.text ?? '';
    out.completion_stream = s;
    s = '';
    let usage = null;
    const chs = await client.chat.completions.create({ model: 'm', messages: msgs, max_tokens: 40, temperature: 0, stream: true,
                                                      stream_options: { include_usage: true } });
    for await (const chunk of chs) {
        s += chunk.choices[0]?.delta?.content ?? '';
        if (chunk.usage) usage = chunk.usage;
    }
    out.chat_stream = s;
    out.chat_stream_tokens = usage ? usage.completion_tokens : -1;
    const sp = await client.completions.create({ model: 'm', prompt, max_tokens: 40, temperature: 0,
                                                 speculative: { method: 'ngram', gamma: 4 } });
    out.spec = sp.choices[0].text;
    out.spec_method = sp.usage.method;
    try {
        await client.completions.create({ model: 'm', prompt, max_tokens: -1 });
        out.error_status = 0;
    } catch (e) {
        out.error_status = e.status;
        out.error_param = e.param;
    }
    const models = await client.models.list();
    out.model_id = models.data[0].id;
    console.log(JSON.stringify(out));
}

main().catch((e) => {
    console.error('client error:', e.message);
    process.exit(1);
});
